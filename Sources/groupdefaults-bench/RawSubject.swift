import CLMDBReference

/// Raw LMDB through the C reference target: the same work with no Swift in the timed loops.
final class RawSubject: Subject {
    let name = "raw LMDB"
    let env: OpaquePointer
    let workload: Workload
    /// Per variant, the keys with their integer (8 bytes, native order) or string (UTF-8) values.
    private let integers: [Dataset]
    private let strings: [Dataset]

    init(path: String, flags: UInt32, mapSize: Int, workload: Workload) throws {
        var error = [CChar](repeating: 0, count: 256)
        guard let env = gdref_open(path, flags, mapSize, &error, error.count) else {
            throw BenchError("raw LMDB at \(path): \(String(cBuffer: error))")
        }
        self.env = env
        self.workload = workload
        let keys = workload.keys
        integers = try [0, 1].map { variant in
            try Dataset(keys.indices.map { (keys[$0], Dataset.bytes(of: Workload.integer($0, variant: variant))) })
        }
        strings = try [0, 1].map { variant in
            try Dataset(keys.indices.map { (keys[$0], Array(Workload.string($0, variant: variant).utf8)) })
        }
    }

    deinit {
        gdref_close(env)
    }

    func populate(_ kind: Workload.Kind) throws {
        try check(Double(gdref_put_all(env, datasets(kind)[0].pointer)))
    }

    func measure(_ operation: Operation, _ plan: Plan) throws -> Double {
        let datasets = datasets(operation.valueKind)
        return try medianNanosecondsPerOp(plan) { first, ops in
            switch operation {
            case .getInteger, .getString:
                return try check(gdref_bench_get(env, datasets[0].pointer, first, ops))
            case .setInteger, .setString:
                let dataset = datasets[Workload.variant(forOp: first)]
                return try check(gdref_bench_put(env, dataset.pointer, first, ops))
            case .update:
                return try check(gdref_bench_increment(env, datasets[0].pointer, first, ops))
            case .write100:
                let firstKeyOp = first * Workload.keysPerWrite
                let dataset = datasets[Workload.variant(forOp: firstKeyOp)]
                return try check(gdref_bench_write_many(env, dataset.pointer, firstKeyOp, Workload.keysPerWrite, ops))
            case .coldStart, .notify, .sync:
                throw BenchError("\(operation.label) is measured in child processes")
            }
        }
    }

    /// The LMDB calls of a GroupDefaults string `set`, made from C: the floor under the store's set.
    func measureSetCalls(_ plan: Plan) throws -> Double {
        try medianNanosecondsPerOp(plan) { first, ops in
            try check(gdref_bench_set_calls(env, strings[Workload.variant(forOp: first)].pointer, first, ops))
        }
    }

    func integer(forKey key: String) throws -> Int? {
        let bytes = try value(forKey: key)
        guard bytes.count == MemoryLayout<Int64>.size else { throw BenchError("raw LMDB: \(key) is not an integer") }
        return Int(bytes.withUnsafeBytes { $0.loadUnaligned(as: Int64.self) })
    }

    func string(forKey key: String) throws -> String? {
        String(decoding: try value(forKey: key), as: UTF8.self)
    }

    private func value(forKey key: String) throws -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let length = Array(key.utf8).withUnsafeBytes { key in
            gdref_get(env, key.baseAddress, key.count, &buffer, buffer.count)
        }
        try check(Double(length))
        return Array(buffer.prefix(length))
    }

    /// The median ns of one transaction putting `keys` string values, over `runs` runs after a
    /// warm-up one.
    func medianTransaction(writing keys: Int, runs: Int) throws -> Double {
        var samples: [Double] = []
        for run in 0...runs {
            let perTransaction = try check(gdref_bench_write_many(env, strings[run % 2].pointer, 0, keys, 1))
            if run > 0 { samples.append(perTransaction) }
        }
        return median(samples)
    }

    private func datasets(_ kind: Workload.Kind) -> [Dataset] {
        kind == .integers ? integers : strings
    }

    /// Passes a C result through, or throws the environment's last error if it is negative.
    @discardableResult
    private func check(_ result: Double) throws -> Double {
        guard result >= 0 else { throw BenchError("raw LMDB: \(String(cString: gdref_env_error(env)))") }
        return result
    }
}

/// A `gdref_dataset`: keys and values copied into C once, before anything is timed.
final class Dataset {
    let pointer: OpaquePointer

    init(_ entries: [(key: String, value: [UInt8])]) throws {
        guard let pointer = gdref_dataset_create(entries.count) else { throw BenchError("out of memory") }
        self.pointer = pointer
        for (key, value) in entries {
            let added = Array(key.utf8).withUnsafeBytes { key in
                value.withUnsafeBytes { value in
                    gdref_dataset_add(pointer, key.baseAddress, key.count, value.baseAddress, value.count)
                }
            }
            guard added == 0 else { throw BenchError("out of memory") }
        }
    }

    deinit {
        gdref_dataset_free(pointer)
    }

    static func bytes(of integer: Int) -> [UInt8] {
        withUnsafeBytes(of: Int64(integer)) { Array($0) }
    }
}
