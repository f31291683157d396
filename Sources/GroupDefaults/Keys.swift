import Foundation
import GroupDefaultsWire
import Synchronization

extension SharedDefaults {
    /// The namespace for typed keys: extend it with static constants.
    ///
    /// ```swift
    /// extension SharedDefaults.Keys {
    ///     static let sound = Key<String>("sound", default: "default")
    ///     static let volume = Key<Double>("volume", default: 0.8)
    /// }
    /// defaults[.sound] = "bell.aiff"
    /// let sound = defaults[.sound]
    /// ```
    public class Keys: @unchecked Sendable {  // no state of its own
        init() {}

        /// ``SharedDefaults/Key``, by its short name inside `extension SharedDefaults.Keys { … }`
        /// (whose scope does not include `SharedDefaults`' own members).
        public typealias Key<Value: Codable & Sendable> = SharedDefaults.Key<Value>
    }

    /// A key with a value type and a default, read and written with `defaults[key]`.
    ///
    /// Property-list types (`String`, `Int`, `Double`, `Float`, `Bool`, `Date`, `Data`, `URL`, and
    /// arrays, `[String: …]` dictionaries and optionals of them) are stored as themselves, so
    /// `string(forKey:)`, other processes and the `groupdefaults` tool read them as usual. Any other
    /// `Codable` type is stored as a JSON string. An optional key whose value is set to nil is removed.
    public final class Key<Value: Codable & Sendable>: Keys, @unchecked Sendable {  // immutable, Value is Sendable
        /// The key under which the value is stored in the suite, as `string(forKey:)` and the
        /// `groupdefaults` tool name it.
        public let name: String
        /// What `defaults[key]` returns when neither the suite nor the registered defaults hold a
        /// value under `name`, or when the value held does not convert to `Value`.
        public let defaultValue: Value
        /// Whether the key follows the suite to other devices (the default) or stays on this one.
        public let sync: SyncScope

        /// Creates a typed key; declare it as a static constant in an extension of ``SharedDefaults/Keys``.
        ///
        /// - Parameters:
        ///   - name: The key in the suite.
        ///   - defaultValue: The value read while nothing convertible is stored or registered.
        ///   - sync: `.local` keeps the key on this device when the suite is synced (see ``SyncScope``).
        public init(_ name: String, default defaultValue: Value, sync: SyncScope = .synced) {
            self.name = name
            self.defaultValue = defaultValue
            self.sync = sync
        }
    }

    /// Whether a typed key's value follows the suite to the user's other devices.
    ///
    /// ```swift
    /// extension SharedDefaults.Keys {
    ///     static let windowFrame = Key<[Double]>("windowFrame", default: [0, 0, 800, 600], sync: .local)
    /// }
    /// ```
    /// The first time a process reads or writes a `.local` key, its name joins the suite's
    /// local-only keys (those of `groupdefaults-sync configure --exclude`, which `groupdefaults-sync
    /// status` lists): it gets no pending marks, is never pushed, and pulled values for it are not
    /// applied, in every process of the device. The declaration is kept in the suite apart from
    /// `configure --exclude`'s patterns, which a later `configure` replaces without touching it: a
    /// key once declared local stays local in that suite. (The first use of such a key in a process
    /// is a small write, even when it is a read.)
    public enum SyncScope: Sendable, Hashable {
        /// The key is synced with the suite (the default).
        case synced
        /// The key stays on this device.
        case local
    }

    /// The value under `key`, converted to its type; the key's default when nothing is stored or
    /// the stored value does not convert (that case is also reported in `lastError`).
    public subscript<Value>(key: Key<Value>) -> Value {
        get {
            declareScope(of: key)
            guard let stored = value(forKey: key.name) else { return key.defaultValue }
            do {
                return try TypedValue.decode(Value.self, from: stored)
            } catch {
                report(
                    store.error(
                        .corruptValue,
                        key: key.name,
                        "the stored \(stored.typeName) does not convert to \(Value.self): \(error); using the key's default"
                    )
                )
                return key.defaultValue
            }
        }
        set {
            declareScope(of: key)
            var pinned = false
            do {
                let encoded = try TypedValue.encode(newValue)
                try write { tx in
                    if let encoded { try tx.set(encoded, forKey: key.name) } else { try tx.removeValue(forKey: key.name) }
                    pinned = try tx.isPinned(key.name)
                }
            } catch {
                report(error)
                return
            }
            reportShadowedWrite(ofKey: key.name, pinned: pinned)
        }
    }

    /// Removes the value of a typed key, so that it reads as its default again.
    public func reset<Value>(_ key: Key<Value>) {
        declareScope(of: key)
        removeObject(forKey: key.name)
    }

    /// Records a `.local` key among the suite's local-only keys, once per process (a failure is
    /// reported in `lastError`, and tried again at the next use).
    func declareScope<Value>(of key: Key<Value>) {
        guard key.sync == .local, !store.declaredLocal.withLock({ $0.contains(key.name.exact) }) else { return }
        do {
            // Inside another write, the declaration is that write's: remembered only once it stands.
            let joinsAnotherWrite = store.isWritingOnCurrentThread
            try declareLocalOnly(key.name)
            if !joinsAnotherWrite { _ = store.declaredLocal.withLock { $0.insert(key.name.exact) } }
        } catch {
            report(error)
        }
    }
}

/// Types stored as property-list values rather than as JSON.
protocol PropertyListConvertible {
    init?(propertyListValue: PropertyListValue)
    /// nil for an optional that holds nothing: the key is removed.
    var propertyListValue: PropertyListValue? { get }
}

/// Conversion of typed-key values to and from what a suite stores.
enum TypedValue {
    struct Mismatch: Error, CustomStringConvertible {
        let description: String
    }

    static func encode<Value: Encodable>(_ value: Value) throws -> PropertyListValue? {
        if let convertible = value as? any PropertyListConvertible { return convertible.propertyListValue }
        let json = try JSONEncoder().encode(value)
        return .string(String(decoding: json, as: UTF8.self))
    }

    static func decode<Value: Decodable>(_ type: Value.Type, from stored: PropertyListValue) throws -> Value {
        if let convertible = Value.self as? any PropertyListConvertible.Type {
            guard let value = convertible.init(propertyListValue: stored) else {
                throw Mismatch(description: "not convertible")
            }
            return value as! Value
        }
        guard case .string(let json) = stored else { throw Mismatch(description: "expected a JSON string") }
        return try JSONDecoder().decode(Value.self, from: Data(json.utf8))
    }
}

extension PropertyListValue: PropertyListConvertible {
    init?(propertyListValue: PropertyListValue) { self = propertyListValue }
    var propertyListValue: PropertyListValue? { self }
}

extension String: PropertyListConvertible {
    init?(propertyListValue: PropertyListValue) {
        guard let v = propertyListValue.coercedString else { return nil }
        self = v
    }
    var propertyListValue: PropertyListValue? { .string(self) }
}

extension Int: PropertyListConvertible {
    init?(propertyListValue: PropertyListValue) {
        guard let v = propertyListValue.coercedInteger else { return nil }
        self = v
    }
    var propertyListValue: PropertyListValue? { .integer(self) }
}

extension Double: PropertyListConvertible {
    init?(propertyListValue: PropertyListValue) {
        guard let v = propertyListValue.coercedDouble else { return nil }
        self = v
    }
    var propertyListValue: PropertyListValue? { .double(self) }
}

extension Float: PropertyListConvertible {
    init?(propertyListValue: PropertyListValue) {
        guard let v = propertyListValue.coercedDouble else { return nil }
        self = Float(v)
    }
    var propertyListValue: PropertyListValue? { .double(Double(self)) }
}

extension Bool: PropertyListConvertible {
    init?(propertyListValue: PropertyListValue) {
        guard let v = propertyListValue.coercedBool else { return nil }
        self = v
    }
    var propertyListValue: PropertyListValue? { .bool(self) }
}

extension Date: PropertyListConvertible {
    init?(propertyListValue: PropertyListValue) {
        guard let v = propertyListValue.dateValue else { return nil }
        self = v
    }
    var propertyListValue: PropertyListValue? { .date(self) }
}

extension Data: PropertyListConvertible {
    init?(propertyListValue: PropertyListValue) {
        guard let v = propertyListValue.dataValue else { return nil }
        self = v
    }
    var propertyListValue: PropertyListValue? { .data(self) }
}

extension URL: PropertyListConvertible {
    init?(propertyListValue: PropertyListValue) {
        guard let v = propertyListValue.coercedURL else { return nil }
        self = v
    }
    var propertyListValue: PropertyListValue? { .string(absoluteString) }
}

extension Array: PropertyListConvertible where Element: PropertyListConvertible {
    init?(propertyListValue: PropertyListValue) {
        guard let array = propertyListValue.arrayValue else { return nil }
        var result: [Element] = []
        result.reserveCapacity(array.count)
        for element in array {
            guard let converted = Element(propertyListValue: element) else { return nil }
            result.append(converted)
        }
        self = result
    }
    var propertyListValue: PropertyListValue? { .array(compactMap(\.propertyListValue)) }
}

extension Dictionary: PropertyListConvertible where Key == String, Value: PropertyListConvertible {
    init?(propertyListValue: PropertyListValue) {
        guard let dictionary = propertyListValue.dictionaryValue else { return nil }
        var result: [String: Value] = [:]
        for (key, element) in dictionary {
            guard let converted = Value(propertyListValue: element) else { return nil }
            result[key] = converted
        }
        self = result
    }
    var propertyListValue: PropertyListValue? { .dictionary(compactMapValues(\.propertyListValue)) }
}

extension Optional: PropertyListConvertible where Wrapped: PropertyListConvertible {
    init?(propertyListValue: PropertyListValue) {
        guard let wrapped = Wrapped(propertyListValue: propertyListValue) else { return nil }
        self = .some(wrapped)
    }
    var propertyListValue: PropertyListValue? { self?.propertyListValue }
}
