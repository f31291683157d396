/// One of the three stores the benchmark compares, set up in its own fresh location.
protocol Subject {
    var name: String { get }
    var workload: Workload { get }
    /// Writes the initial value of every key (variant 0 of `kind`), in one transaction where possible.
    func populate(_ kind: Workload.Kind) throws
    /// Runs `operation` per `plan` and returns the median ns/op.
    func measure(_ operation: Operation, _ plan: Plan) throws -> Double
    /// Reads one value back, outside any measurement.
    func integer(forKey key: String) throws -> Int?
    func string(forKey key: String) throws -> String?
}

extension Subject {
    /// Reads back what the last of `totalOps` operations left in its key, so that a write that
    /// failed silently cannot pass for a fast one.
    func verify(_ operation: Operation, totalOps: Int) throws {
        let op = operation == .write100 ? totalOps * Workload.keysPerWrite - 1 : totalOps - 1
        let index = op % Workload.keyCount
        let key = workload.key(forOp: op)
        switch operation {
        case .getInteger:
            try expect(integer(forKey: key), workload.initialInteger(index), operation)
        case .getString, .coldStart, .notify, .sync:
            try expect(string(forKey: key), workload.initialString(index), operation)
        case .setInteger:
            try expect(integer(forKey: key), workload.integer(forOp: op), operation)
        case .setString, .write100:
            try expect(string(forKey: key), workload.string(forOp: op), operation)
        case .update:
            try expect(integer(forKey: key), workload.integerAfterIncrements(index: index, ops: totalOps), operation)
        }
    }

    private func expect<T: Equatable>(_ actual: T?, _ expected: T, _ operation: Operation) throws {
        guard actual == expected else {
            let read = actual.map { "\($0)" } ?? "nil"
            throw BenchError("\(name), \(operation.rawValue): read back \(read), expected \(expected)")
        }
    }
}
