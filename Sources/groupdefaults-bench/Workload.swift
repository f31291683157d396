/// The data set: 1,000 keys like `setting.notification.sound.000123` with string values of
/// about 60 bytes, or integers for the integer operations.
///
/// Operation number `op` uses key `op % keyCount`. Every value comes in two variants: setup
/// writes variant 0 and each pass over the keys writes the other one, so a set never writes the
/// value the key already holds.
struct Workload: Sendable {
    static let keyCount = 1_000
    static let keysPerWrite = 100

    let keys: [String]
    private let strings: [[String]]

    init() {
        let indices = 0..<Self.keyCount
        keys = indices.map(Self.key)
        strings = [0, 1].map { variant in indices.map { Self.string($0, variant: variant) } }
    }

    static func key(_ index: Int) -> String {
        "setting.notification.sound.\(sixDigits(index))"
    }

    /// The string value of key `index` in `variant` (0 or 1): 63 bytes.
    static func string(_ index: Int, variant: Int) -> String {
        "sound://group.com.example.chat/Library/Sounds/ring-\(sixDigits(index))-\(variant == 0 ? "A" : "B").caf"
    }

    /// The integer value of key `index` in `variant` (0 or 1).
    static func integer(_ index: Int, variant: Int) -> Int {
        index + variant * 1_000_000
    }

    private static func sixDigits(_ n: Int) -> String {
        let digits = String(n)
        return String(repeating: "0", count: max(0, 6 - digits.count)) + digits
    }

    /// 0 for setup, then 1, 0, 1, … for each pass of the operations over the keys.
    static func variant(forOp op: Int) -> Int { (op / keyCount + 1) % 2 }

    @inline(__always) func key(forOp op: Int) -> String { keys[op % Self.keyCount] }
    @inline(__always) func string(forOp op: Int) -> String { strings[Self.variant(forOp: op)][op % Self.keyCount] }
    @inline(__always) func integer(forOp op: Int) -> Int { Self.integer(op % Self.keyCount, variant: Self.variant(forOp: op)) }

    func initialString(_ index: Int) -> String { strings[0][index] }
    func initialInteger(_ index: Int) -> Int { Self.integer(index, variant: 0) }

    /// What key `index` holds after `ops` increments that started from the initial integers.
    func integerAfterIncrements(index: Int, ops: Int) -> Int {
        initialInteger(index) + ops / Self.keyCount + (index < ops % Self.keyCount ? 1 : 0)
    }

    /// The kind of values an operation works on, written by setup before it is measured.
    enum Kind { case integers, strings }
}

extension Operation {
    var valueKind: Workload.Kind {
        switch self {
        case .getInteger, .setInteger, .update: .integers
        case .getString, .setString, .write100, .coldStart, .notify, .sync: .strings
        }
    }
}
