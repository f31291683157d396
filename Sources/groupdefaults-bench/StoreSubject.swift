import Foundation
import GroupDefaults

/// GroupDefaults' `SharedDefaults`, used as an app would.
final class StoreSubject: Subject {
    static let suiteName = "bench"

    let defaults: SharedDefaults
    let name = "GroupDefaults"
    let workload: Workload

    init(directory: String, workload: Workload) throws {
        defaults = try Self.open(directory: URL(fileURLWithPath: directory))
        self.workload = workload
    }

    static func open(directory: URL) throws -> SharedDefaults {
        try SharedDefaults(suiteName: suiteName, directory: directory, configuration: .init())
    }

    func populate(_ kind: Workload.Kind) throws {
        try defaults.write { tx in
            for index in 0..<Workload.keyCount {
                let value: PropertyListValue =
                    switch kind {
                    case .integers: .integer(workload.initialInteger(index))
                    case .strings: .string(workload.initialString(index))
                    }
                try tx.set(value, forKey: workload.keys[index])
            }
        }
    }

    func measure(_ operation: Operation, _ plan: Plan) throws -> Double {
        let nanoseconds = try run(operation, plan)
        // The UserDefaults-style setters do not throw; they leave their failure here.
        if let error = defaults.lastError {
            throw BenchError("GroupDefaults, \(operation.rawValue): \(error)")
        }
        return nanoseconds
    }

    private func run(_ operation: Operation, _ plan: Plan) throws -> Double {
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
                    return 0
                }
            case .setString:
                return timeBatch(first: first, ops: ops) { op in
                    defaults.set(workload.string(forOp: op), forKey: workload.key(forOp: op))
                    return 0
                }
            case .update:
                return try timeBatch(first: first, ops: ops) { op in
                    let new = try defaults.update(workload.key(forOp: op)) { old in
                        .integer((old?.intValue ?? 0) + 1)
                    }
                    return new?.intValue ?? -1
                }
            case .write100:
                return try timeBatch(first: first, ops: ops) { op in
                    try defaults.write { tx in
                        let firstKeyOp = op * Workload.keysPerWrite
                        for keyOp in firstKeyOp..<firstKeyOp + Workload.keysPerWrite {
                            try tx.set(.string(workload.string(forOp: keyOp)), forKey: workload.key(forOp: keyOp))
                        }
                    }
                    return 0
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
}
