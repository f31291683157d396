/// The measured operations, in the order of the table.
enum Operation: String, CaseIterable, Sendable {
    case getInteger = "get-integer"
    case getString = "get-string"
    case setInteger = "set-integer"
    case setString = "set-string"
    case update = "update"
    case write100 = "write-100"
    case coldStart = "cold-start"
    case notify = "notify"
    case sync = "sync"

    var label: String {
        switch self {
        case .getInteger: "get integer"
        case .getString: "get string"
        case .setInteger: "set integer"
        case .setString: "set string"
        case .update: "update increment"
        case .write100: "write 100 keys"
        case .coldStart: "cold open + first read"
        case .notify: "change notifications"
        case .sync: "sync hooks"
        }
    }

    /// What Foundation's `UserDefaults` does for this operation.
    var userDefaultsCall: String {
        switch self {
        case .getInteger: "integer(forKey:)"
        case .getString: "string(forKey:)"
        case .setInteger, .setString: "set+synchronize"
        case .update: "read+set+synchronize"
        case .write100: "100 sets+synchronize"
        case .coldStart: "init(suiteName:)+read"
        case .notify: "didChangeNotification (own process only)"
        case .sync: "—"
        }
    }

    /// The target for GroupDefaults.
    var target: Target {
        switch self {
        // The latest issue's ratios to raw LMDB with the store's own flags.
        case .getInteger, .getString: .timesRaw(1.5)
        case .setInteger, .setString: .timesRaw(2)
        case .update: .timesRaw(2.5)
        case .write100: .timesRaw(1.5)
        case .coldStart: .timesRaw(2)
        // Each of its rows has its own target (Notifications.rows); this is the p50 latency's.
        case .notify: .atMost(nanoseconds: 100_000)
        // Each of its rows has its own target (SyncHooks.rows).
        case .sync: .atMost(nanoseconds: 400)
        }
    }
}

enum Target: Sendable {
    case timesRaw(Double)
    /// At most this factor of the reference, which is the operation's own floor (its LMDB calls).
    case timesFloor(Double)
    case atMost(nanoseconds: Double)

    var text: String {
        switch self {
        case .timesRaw(let factor): "≤ \(Format.number(factor))× raw"
        case .timesFloor(let factor): "≤ \(Format.number(factor))× floor"
        case .atMost(let ns): ns < 10_000 ? "≤ \(Int(ns)) ns" : "≤ \(Format.duration(ns))"
        }
    }

    func isMet(groupDefaults: Double, raw: Double) -> Bool {
        switch self {
        case .timesRaw(let factor), .timesFloor(let factor): groupDefaults <= factor * raw
        case .atMost(let ns): groupDefaults <= ns
        }
    }
}
