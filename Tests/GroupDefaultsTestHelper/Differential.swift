import Foundation
import GroupDefaults
import TestSupport

/// A seeded sequence of operations applied to Foundation's `UserDefaults(suiteName:)` and to a
/// `SharedDefaults` suite side by side, every getter of every key compared after every step.
///
/// It runs in a process of its own because Foundation reads `HOME` and `XDG_CONFIG_HOME` once, at
/// start-up: the test starts it with both pointing into a temporary directory, so that
/// Foundation's files go there. Prints one line per difference found ("difference …"), then
/// "done N" with the number of operations; exit 0 either way.
///
/// Left out by construction, each a row of the table of docs/guide/differences-from-userdefaults.md (or a
/// crash or hang of Foundation's on Linux, said where):
/// - the empty key, which SharedDefaults refuses (LMDB keys are not empty);
/// - `Int.max`, `UInt64` above it, and Floats of 2^24 or more (the scalar test covers them);
/// - URLs other than file URLs, and `url(forKey:)` of a string that is not an absolute path.
struct Differential {
    static let suite = "groupdefaults.differential.ops"
    static let printedSteps = Int(ProcessInfo.processInfo.environment["GROUPDEFAULTS_DIFF_PRINTED_STEPS"] ?? "") ?? 5
    let foundation: UserDefaults
    let ours: SharedDefaults
    var random: SeededGenerator
    /// Unicode, dots, blanks, a long one: keys both accept.
    static let keys = ["k", "sound", "a.b.c", "ключ", "🙂 emoji", " ", String(repeating: "x", count: 200)]

    /// Whether `compare()` compares `dictionaryRepresentation()` (Foundation on Linux leaves the
    /// argument domain, added suites and global domain out of it: a stated difference).
    var comparesRepresentation = true
    /// Whether values are those Foundation reads back from its file as they were written: dates
    /// in whole seconds and no -0.0 (Foundation reads a date back in whole seconds and -0.0 as 0.0,
    /// a stated difference), for sequences in which Foundation writes its file (setting a
    /// persistent domain does).
    var fileSafeValues = false
    var numbers: [Double] {
        // -1e-300 as a Float is -0.0 too.
        fileSafeValues ? scalarNumbers.filter { !($0 == 0 && $0.sign == .minus) && !(Float($0) == 0 && Float($0).sign == .minus) } : scalarNumbers
    }

    init(directory: URL, seed: UInt64) throws {
        guard let foundation = UserDefaults(suiteName: Self.suite) else { fail("no UserDefaults for \(Self.suite)") }
        foundation.removePersistentDomain(forName: Self.suite)
        try self.init(foundation: foundation, ours: SharedDefaults(suiteName: "differential-ops", directory: directory), seed: seed)
    }

    init(foundation: UserDefaults, ours: SharedDefaults, seed: UInt64) {
        self.foundation = foundation
        self.ours = ours
        random = SeededGenerator(seed: seed)
    }

    /// Runs `count` operations. A difference stays until the key changes again, so only the first
    /// steps that show new ones are printed in full.
    mutating func run(count: Int) {
        var stepsWithDifferences = 0
        var previous: Set<String> = []
        for step in 0..<count {
            var operation = nextOperation()
            while operation.isEqualButNotSame(as: foundation) { operation = nextOperation() }
            operation.apply(foundation)
            operation.apply(ours)
            let differences = Set(compare())
            let new = differences.subtracting(previous)
            previous = differences
            guard !new.isEmpty else { continue }
            stepsWithDifferences += 1
            if stepsWithDifferences <= Self.printedSteps {
                for difference in new.sorted() { say("difference at step \(step), after \(operation): \(difference)") }
            }
        }
        if stepsWithDifferences > Self.printedSteps {
            say("difference: \(stepsWithDifferences - Self.printedSteps) more steps with new differences")
        }
        say("done \(count)")
    }

    // MARK: Operations

    enum Operation: CustomStringConvertible {
        case set(Any, String)
        case setInteger(Int, String)
        case setDouble(Double, String)
        case setFloat(Float, String)
        case setBool(Bool, String)
        case setURL(URL?, String)
        case remove(String)
        case register([String: Any])

        func apply(_ defaults: UserDefaults) {
            switch self {
            case .set(let value, let key): defaults.set(value, forKey: key)
            case .setInteger(let value, let key): defaults.set(value, forKey: key)
            case .setDouble(let value, let key): defaults.set(value, forKey: key)
            case .setFloat(let value, let key): defaults.set(value, forKey: key)
            case .setBool(let value, let key): defaults.set(value, forKey: key)
            // Foundation's set(nil as URL?) calls itself forever (a hang on Linux): its documented
            // meaning, removing the key, is asked for directly.
            case .setURL(nil, let key): defaults.removeObject(forKey: key)
            case .setURL(let value, let key): defaults.set(value, forKey: key)
            case .remove(let key): defaults.removeObject(forKey: key)
            case .register(let values): defaults.register(defaults: values)
            }
        }

        func apply(_ defaults: SharedDefaults) {
            switch self {
            case .set(let value, let key): defaults.set(value, forKey: key)
            case .setInteger(let value, let key): defaults.set(value, forKey: key)
            case .setDouble(let value, let key): defaults.set(value, forKey: key)
            case .setFloat(let value, let key): defaults.set(value, forKey: key)
            case .setBool(let value, let key): defaults.set(value, forKey: key)
            case .setURL(let value, let key): defaults.set(value, forKey: key)
            case .remove(let key): defaults.removeObject(forKey: key)
            case .register(let values): defaults.register(defaults: values)
            }
        }

        /// Whether this sets a value equal to the one Foundation holds, as `NSObject.isEqual` sees it,
        /// but not the same (`1.0` over `1`, `[0]` over `[0.0]`): Foundation then keeps the one it
        /// holds, type and all, where SharedDefaults stores the new one (a stated difference).
        func isEqualButNotSame(as defaults: UserDefaults) -> Bool {
            let (new, key): (Any, String)
            switch self {
            case .set(let value, let k): (new, key) = (value, k)
            case .setInteger(let value, let k): (new, key) = (value, k)
            case .setDouble(let value, let k): (new, key) = (value, k)
            case .setFloat(let value, let k): (new, key) = (value, k)
            case .setBool(let value, let k): (new, key) = (value, k)
            default: return false
            }
            // What the suite itself holds (or registers), not what the search list reads: an
            // argument or an added suite may stand in front of it.
            guard let held = defaults.dictionaryRepresentation()[key] else { return false }
            let equal = (held as AnyObject as? NSObject)?.isEqual(new as AnyObject) ?? false
            return equal && Differential.canonical(held) != Differential.canonical(new)
        }

        var description: String {
            switch self {
            case .set(let value, let key): "set(\(Differential.canonical(value)), \(key.debugDescription))"
            case .setInteger(let value, let key): "set(\(value) as Int, \(key.debugDescription))"
            case .setDouble(let value, let key): "set(\(value) as Double, \(key.debugDescription))"
            case .setFloat(let value, let key): "set(\(value) as Float, \(key.debugDescription))"
            case .setBool(let value, let key): "set(\(value) as Bool, \(key.debugDescription))"
            case .setURL(let value, let key): "set(\(value.map { "URL(\($0))" } ?? "nil") as URL?, \(key.debugDescription))"
            case .remove(let key): "removeObject(\(key.debugDescription))"
            case .register(let values): "register(\(Differential.canonical(values)))"
            }
        }
    }

    mutating func below(_ n: Int) -> Int { Int(random.next() % UInt64(n)) }

    mutating func key() -> String { Self.keys[below(Self.keys.count)] }

    mutating func nextOperation() -> Operation {
        switch below(20) {
        case 0..<8: return .set(value(depth: 0), key())
        case 8: return .setInteger(Int(Int32(truncatingIfNeeded: random.next())), key())
        case 9: return .setDouble(numbers[below(numbers.count)], key())
        case 10: return .setFloat(Float(numbers[below(numbers.count)]).exactAsDouble, key())
        case 11: return .setBool(below(2) == 0, key())
        case 12: return .setURL(below(4) == 0 ? nil : URL(fileURLWithPath: "/tmp/" + Self.keys[below(3)]), key())
        case 13..<16: return .remove(key())
        case 16: return .set(value(depth: 0), key())
        default:
            var values: [String: Any] = [:]
            for _ in 0..<1 + below(3) { values[key()] = value(depth: 0) }
            return .register(values)
        }
    }

    let scalarStrings = ["", "YES", "no", "T", "12abc", " 42", "1e3", "0x1F", "-7.5", "/tmp/file.caf", "/", "ring.caf", "true", "NaN", "ü"]
    let scalarNumbers: [Double] = [0, -0.0, 1, -1, 0.5, 42, 12.34, 1e15, 1e300, -1e-300, .nan, .infinity, -.infinity, 2.5, 0x1p53]

    /// A property-list value, as Swift or Foundation types, nested up to three levels.
    mutating func value(depth: Int) -> Any {
        switch below(depth < 3 ? 16 : 12) {
        case 0, 1: return scalarStrings[below(scalarStrings.count)]
        case 2: return NSString(string: scalarStrings[below(scalarStrings.count)])
        case 3: return Int(Int32(truncatingIfNeeded: random.next())) >> below(31)
        case 4: return numbers[below(numbers.count)]
        case 5: return below(2) == 0
        case 6:
            // NSNumber of each integer width and of booleans; unsigned ones stay within Int.
            switch below(6) {
            case 0: return NSNumber(value: UInt8(truncatingIfNeeded: random.next()))
            case 1: return NSNumber(value: Int16(truncatingIfNeeded: random.next()))
            case 2: return NSNumber(value: UInt32(truncatingIfNeeded: random.next()))
            case 3: return NSNumber(value: Int64(truncatingIfNeeded: random.next()) >> 2)
            case 4: return NSNumber(value: below(2) == 0)
            default: return NSNumber(value: numbers[below(numbers.count)])
            }
        case 7: return Float(numbers[below(numbers.count)]).exactAsDouble
        case 8:
            let fraction = fileSafeValues ? 0 : Double(below(1000)) / 1000
            return Date(timeIntervalSinceReferenceDate: Double(Int32(truncatingIfNeeded: random.next())) + fraction)
        case 9: return Data((0..<below(12)).map { _ in UInt8(truncatingIfNeeded: random.next()) })
        case 10: return NSData(data: Data((0..<below(6)).map { _ in UInt8(truncatingIfNeeded: random.next()) }))
        case 11: return NSDate(timeIntervalSinceReferenceDate: Double(below(1 << 30)))
        case 12: return (0..<below(4)).map { _ in value(depth: depth + 1) }
        case 13: return (0..<below(4)).map { _ in scalarStrings[below(scalarStrings.count)] }  // a [String]
        case 14:
            var dictionary: [String: Any] = [:]
            for _ in 0..<below(4) { dictionary[key()] = value(depth: depth + 1) }
            return dictionary
        default:
            return NSArray(array: (0..<below(3)).map { _ in value(depth: depth + 1) })
        }
    }

    // MARK: Comparing

    /// Every getter of every key, on both sides; one line per disagreement.
    func compare() -> [String] {
        var found: [String] = []
        func check(_ getter: String, _ key: String, _ ours: String, _ theirs: String) {
            if ours != theirs { found.append("\(getter)(\(key.debugDescription)): \(ours), Foundation \(theirs)") }
        }
        for key in Self.keys {
            let stored = foundation.object(forKey: key)
            check("object", key, Self.canonical(ours.object(forKey: key)), Self.canonical(stored))
            check("string", key, Self.canonical(ours.string(forKey: key)), Self.canonical(foundation.string(forKey: key)))
            check("integer", key, "\(ours.integer(forKey: key))", "\(foundation.integer(forKey: key))")
            check("double", key, Self.canonical(ours.double(forKey: key)), Self.canonical(foundation.double(forKey: key)))
            check("float", key, Self.canonical(Double(ours.float(forKey: key))), Self.canonical(Double(foundation.float(forKey: key))))
            check("bool", key, "\(ours.bool(forKey: key))", "\(foundation.bool(forKey: key))")
            check("array", key, Self.canonical(ours.array(forKey: key)), Self.canonical(foundation.array(forKey: key)))
            check("stringArray", key, Self.canonical(ours.stringArray(forKey: key)), Self.canonical(foundation.stringArray(forKey: key)))
            check("dictionary", key, Self.canonical(ours.dictionary(forKey: key)), Self.canonical(foundation.dictionary(forKey: key)))
            check("data", key, Self.canonical(ours.data(forKey: key)), Self.canonical(foundation.data(forKey: key)))
            // url(forKey:) of Data makes Foundation unarchive it (and crash on bytes that are not an
            // archive); of a string, Foundation keeps only the path of any URL (a stated difference):
            // compared for strings that are absolute paths, and for nothing stored.
            if stored == nil || (stored as? String)?.hasPrefix("/") == true {
                check("url", key, Self.canonical(ours.url(forKey: key)), Self.canonical(foundation.url(forKey: key)))
            }
        }
        guard comparesRepresentation else { return found }
        let theirs = foundation.dictionaryRepresentation().filter { Self.keys.contains($0.key) }
        let ourRepresentation = ours.dictionaryRepresentation().filter { Self.keys.contains($0.key) }
        check("dictionaryRepresentation", "", Self.canonical(ourRepresentation), Self.canonical(theirs))
        return found
    }

    /// A value as a user's code compares it: containers element by element,
    /// numbers by kind and value. A `Float` compares as the double of the decimal it prints as, and
    /// an `NSNumber` as the Swift value it holds (a boolean, an integer or a double): SharedDefaults
    /// keeps one floating-point type and gives numbers back as `Bool`, `Int` or `Double` (docs/guide/differences-from-userdefaults.md).
    static func canonical(_ value: Any?) -> String {
        guard let value else { return "nil" }
        // Foundation's arrays hold some elements as optionals in an `Any`; a cast sees through them.
        let mirror = Mirror(reflecting: value)
        if mirror.displayStyle == .optional { return canonical(mirror.children.first?.value) }
        switch value {
        case let v as Bool where type(of: value) == Bool.self: return "bool(\(v))"
        case let v as Int where type(of: value) == Int.self: return "int(\(v))"
        case let v as Double where type(of: value) == Double.self: return "double(\(v))"
        case let v as Float where type(of: value) == Float.self: return "double(\(Double("\(v)") ?? Double(v)))"
        case let v as NSNumber where type(of: value) is NSNumber.Type:
            switch String(cString: v.objCType) {
            case "c",
                "B" where v.intValue == 0 || v.intValue == 1:
                return "bool(\(v.boolValue))"
            case "f": return canonical(v.floatValue)
            case "d": return canonical(v.doubleValue)
            default: return "int(\(v.intValue))"
            }
        default: break
        }
        if let url = value as? URL { return "url(\(url.absoluteString))" }
        if let string = value as? String { return "string(\(string.debugDescription))" }
        if let date = value as? Date { return "date(\(date.timeIntervalSinceReferenceDate))" }
        if let data = value as? Data { return "data(\(data.base64EncodedString()))" }
        if let array = value as? [Any] { return "[" + array.map(canonical).joined(separator: ", ") + "]" }
        if let dictionary = value as? [String: Any] {
            return "{" + dictionary.keys.sorted().map { "\($0.debugDescription): \(canonical(dictionary[$0]))" }.joined(separator: ", ") + "}"
        }
        return "\(type(of: value))(\(value))"
    }
}

extension Float {
    /// The float, or 12.5 when it is not the double of the decimal it prints as (`12.34`) or is
    /// 2^24 or more: SharedDefaults keeps one floating-point type (a stated difference, which the
    /// scalar test covers).
    var exactAsDouble: Float {
        guard isFinite else { return self }
        return abs(self) < 0x1p24 && Double("\(self)") == Double(self) ? self : 12.5
    }
}
