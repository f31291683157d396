import Foundation

/// Foundation's `UserDefaults(suiteName:)`. A set is followed by `synchronize()`, because only
/// then does another process see it, which GroupDefaults' set guarantees on return.
final class FoundationSubject: Subject {
    let defaults: UserDefaults
    let name = "UserDefaults"
    let workload: Workload

    init(suiteName: String, workload: Workload) throws {
        defaults = try Self.open(suiteName: suiteName)
        self.workload = workload
    }

    static func open(suiteName: String) throws -> UserDefaults {
        guard let defaults = UserDefaults(suiteName: suiteName) else {
            throw BenchError("UserDefaults(suiteName: \"\(suiteName)\") returned nil")
        }
        return defaults
    }

    func populate(_ kind: Workload.Kind) throws {
        for index in 0..<Workload.keyCount {
            switch kind {
            case .integers: defaults.set(workload.initialInteger(index), forKey: workload.keys[index])
            case .strings: defaults.set(workload.initialString(index), forKey: workload.keys[index])
            }
        }
        try synchronize()
    }

    func measure(_ operation: Operation, _ plan: Plan) throws -> Double {
        let defaults = defaults
        let workload = workload
        return try medianNanosecondsPerOp(plan) { first, ops in
            switch operation {
            case .getInteger:
                return timeBatch(first: first, ops: ops) { op in
                    defaults.integer(forKey: workload.key(forOp: op))
                }
            case .getString:
                return timeBatch(first: first, ops: ops) { op in
                    defaults.string(forKey: workload.key(forOp: op))?.utf8.count ?? -1
                }
            case .setInteger:
                return timeBatch(first: first, ops: ops) { op in
                    defaults.set(workload.integer(forOp: op), forKey: workload.key(forOp: op))
                    return defaults.synchronize() ? 1 : 0
                }
            case .setString:
                return timeBatch(first: first, ops: ops) { op in
                    defaults.set(workload.string(forOp: op), forKey: workload.key(forOp: op))
                    return defaults.synchronize() ? 1 : 0
                }
            case .update:
                return timeBatch(first: first, ops: ops) { op in
                    let key = workload.key(forOp: op)
                    defaults.set(defaults.integer(forKey: key) + 1, forKey: key)
                    return defaults.synchronize() ? 1 : 0
                }
            case .write100:
                return timeBatch(first: first, ops: ops) { op in
                    let firstKeyOp = op * Workload.keysPerWrite
                    for keyOp in firstKeyOp..<firstKeyOp + Workload.keysPerWrite {
                        defaults.set(workload.string(forOp: keyOp), forKey: workload.key(forOp: keyOp))
                    }
                    return defaults.synchronize() ? 1 : 0
                }
            case .coldStart, .notify, .sync:
                throw BenchError("\(operation.label) is measured in child processes")
            }
        }
    }

    func integer(forKey key: String) throws -> Int? {
        defaults.object(forKey: key) == nil ? nil : defaults.integer(forKey: key)
    }

    func string(forKey key: String) throws -> String? {
        defaults.string(forKey: key)
    }

    private func synchronize() throws {
        guard defaults.synchronize() else { throw BenchError("UserDefaults.synchronize() failed") }
    }
}
