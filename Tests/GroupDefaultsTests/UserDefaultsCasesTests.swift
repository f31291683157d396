import Foundation
import GroupDefaults
import TestSupport
import Testing

/// The cases swift-corelibs-foundation checks its own `UserDefaults` with (its `TestUserDefaults`),
/// asked again of `SharedDefaults` in a table of our own: a value registered (and nothing stored
/// over it) or set, then read with one getter.
///
/// Its volatile-domain case has no counterpart: `SharedDefaults` offers no volatile domains
/// (`register(defaults:)` is its in-memory layer, checked here). Its persistent-domain case becomes
/// a suite written through one handle and read whole through another (its notifications are
/// `ObservationTests`' subject).
@Suite("UserDefaults' own cases, asked of SharedDefaults")
struct UserDefaultsCasesTests {
    /// What a case reads back, with the getter that reads it.
    enum Expected: CustomStringConvertible {
        case integer(Int)
        case double(Double)
        case float(Float)
        case bool(Bool)
        case string(String)
        case data(Data)
        case url(URL)

        func holds(in defaults: SharedDefaults, forKey key: String) -> Bool {
            switch self {
            case .integer(let v): defaults.integer(forKey: key) == v
            case .double(let v): defaults.double(forKey: key) == v
            case .float(let v): defaults.float(forKey: key) == v
            case .bool(let v): defaults.bool(forKey: key) == v
            case .string(let v): defaults.string(forKey: key) == v
            case .data(let v): defaults.data(forKey: key) == v
            case .url(let v): defaults.url(forKey: key) == v
            }
        }

        var description: String {
            switch self {
            case .integer(let v): "integer \(v)"
            case .double(let v): "double \(v)"
            case .float(let v): "float \(v)"
            case .bool(let v): "bool \(v)"
            case .string(let v): "string \(v)"
            case .data(let v): "data \(Array(v))"
            case .url(let v): "url \(v)"
            }
        }
    }

    struct Case: CustomTestStringConvertible, Sendable {
        let name: String
        nonisolated(unsafe) let value: Any
        let expected: Expected
        var testDescription: String { name }
    }

    static let bytes: [UInt8] = [0, 1, 2, 3, 4]
    static let helloWorld = URL(fileURLWithPath: "/hello/world")

    /// Registered, then read with nothing stored.
    static let registered: [Case] = [
        Case(name: "an NSNumber, as an integer", value: NSNumber(value: 5), expected: .integer(5)),
        Case(name: "an NSString, as a string", value: "hello" as NSString, expected: .string("hello")),
        Case(name: "a String, as a string", value: "hello", expected: .string("hello")),
        Case(name: "an NSURL, as a URL", value: NSURL(fileURLWithPath: "/hello/world"), expected: .url(helloWorld)),
        Case(name: "a URL, as a URL", value: helloWorld, expected: .url(helloWorld)),
        Case(name: "an NSData, as data", value: NSData(bytes: bytes, length: bytes.count), expected: .data(Data(bytes))),
        Case(name: "a Data, as data", value: Data(bytes), expected: .data(Data(bytes))),
        Case(name: "\"YES\", as a boolean", value: "YES", expected: .bool(true)),
        Case(name: "\"1234\", as an integer", value: "1234", expected: .integer(1234)),
        Case(name: "\"12.34\", as a double", value: "12.34", expected: .double(12.34)),
    ]

    /// Set, then read.
    static let set: [Case] =
        registered + [
            Case(name: "true, as an integer", value: true, expected: .integer(1)),
            Case(name: "a Float 12.34, as an integer", value: 12.34 as Float, expected: .integer(12)),
            Case(name: "a Double 12.34, as an integer", value: 12.34, expected: .integer(12)),
            Case(name: "true, as a float", value: true, expected: .float(1)),
            Case(name: "42, as a float", value: 42, expected: .float(42)),
            Case(name: "a Double 12.34, as a float", value: 12.34, expected: .float(12.34)),
            Case(name: "\"1234\", as a float", value: "1234", expected: .float(1234)),
            Case(name: "true, as a double", value: true, expected: .double(1)),
            Case(name: "42, as a double", value: 42, expected: .double(42)),
            // Foundation reads Double(12.34 as Float), 12.340000152587891: one floating-point type keeps
            // a Float as the decimal it prints as (docs/guide/differences-from-userdefaults.md).
            Case(name: "a Float 12.34, as a double", value: 12.34 as Float, expected: .double(12.34)),
            Case(name: "\"12.34\", as a double", value: "12.34", expected: .double(12.34)),
            Case(name: "true, as a string", value: true, expected: .string("1")),
            Case(name: "42, as a string", value: 42, expected: .string("42")),
            Case(name: "a Float 12.34, as a string", value: 12.34 as Float, expected: .string("12.34")),
            Case(name: "a Double 12.34, as a string", value: 12.34, expected: .string("12.34")),
        ]

    @Test("a registered default is read through every getter when nothing is stored", arguments: registered)
    func registeredDefault(_ item: Case) throws {
        try withTemporaryDirectory { directory in
            let defaults = try SharedDefaults(suiteName: "registered", directory: directory)
            defaults.register(defaults: ["key1": item.value])
            defaults.removeObject(forKey: "key1")
            #expect(defaults.lastError == nil, "\(defaults.lastError!)")
            #expect(item.expected.holds(in: defaults, forKey: "key1"), "\(item.name): expected \(item.expected)")
        }
    }

    @Test("a value set is read back through the getter, converted as UserDefaults converts it", arguments: set)
    func setValue(_ item: Case) throws {
        try withTemporaryDirectory { directory in
            let defaults = try SharedDefaults(suiteName: "set", directory: directory)
            switch item.value {
            // The typed overloads, as a caller's literal picks them.
            case let v as Bool where type(of: item.value) == Bool.self: defaults.set(v, forKey: "key1")
            case let v as Int where type(of: item.value) == Int.self: defaults.set(v, forKey: "key1")
            case let v as Double where type(of: item.value) == Double.self: defaults.set(v, forKey: "key1")
            case let v as Float where type(of: item.value) == Float.self: defaults.set(v, forKey: "key1")
            case let v as URL where type(of: item.value) == URL.self: defaults.set(v, forKey: "key1")
            default: defaults.set(item.value, forKey: "key1")
            }
            #expect(defaults.lastError == nil, "\(defaults.lastError!)")
            #expect(item.expected.holds(in: defaults, forKey: "key1"), "\(item.name): expected \(item.expected)")
            // The same through the untyped `set(_: Any?, forKey:)`.
            defaults.set(item.value as Any?, forKey: "key2")
            #expect(item.expected.holds(in: defaults, forKey: "key2"), "\(item.name), set as Any: expected \(item.expected)")
        }
    }

    @Test("a suite written through one handle is read whole through another, and removing everything empties it")
    func wholeSuite() throws {
        try withTemporaryDirectory { directory in
            let today = Date()
            let values: [String: Any] = [
                "An Integer": 1234, "A Double": 5678.1234, "A String": "Some string",
                "An Array": [1, 2, 3, 4, "Surprise"] as [Any],
                "A Dictionary": ["Swift": "Imperative", "Haskell": "Functional", "LISP": "LISP", "Today": today] as [String: Any],
            ]
            let writer = try SharedDefaults(suiteName: "whole", directory: directory)
            for (key, value) in values { writer.set(value, forKey: key) }
            let reader = try SharedDefaults(suiteName: "whole", directory: directory)
            let read = reader.dictionaryRepresentation()
            #expect(read.count == values.count)
            #expect(read["An Integer"] as? Int == 1234 && read["A Double"] as? Double == 5678.1234)
            #expect(read["A String"] as? String == "Some string")
            let array = try #require(read["An Array"] as? [Any])
            #expect(array.count == 5 && array.prefix(4).compactMap { $0 as? Int } == [1, 2, 3, 4] && array.last as? String == "Surprise")
            let dictionary = try #require(read["A Dictionary"] as? [String: Any])
            #expect(dictionary["Swift"] as? String == "Imperative" && dictionary["LISP"] as? String == "LISP")
            #expect(dictionary["Today"] as? Date == today, "a Date keeps all of its precision")

            try reader.write { try $0.removeAll() }
            #expect(writer.dictionaryRepresentation().isEmpty)
        }
    }
}
