import Glibc

/// How many batches of how many operations to run; the first `warmupBatches` are not counted.
struct Plan: Sendable {
    var warmupBatches = 1
    var batches: Int
    var opsPerBatch: Int

    var totalOps: Int { (warmupBatches + batches) * opsPerBatch }
}

enum Clock {
    /// CLOCK_MONOTONIC in nanoseconds, the clock the C reference uses too.
    @inline(__always)
    static func nanoseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
    }
}

/// Runs the plan's batches one after another and returns the median ns/op of the counted ones.
/// `batch(first, ops)` runs operations `first ..< first + ops` and returns their ns/op.
func medianNanosecondsPerOp(_ plan: Plan, _ batch: (_ first: Int, _ ops: Int) throws -> Double) throws -> Double {
    var samples: [Double] = []
    samples.reserveCapacity(plan.batches)
    for index in 0..<plan.warmupBatches + plan.batches {
        let nanoseconds = try batch(index * plan.opsPerBatch, plan.opsPerBatch)
        guard nanoseconds >= 0 else { throw BenchError("a batch failed") }
        if index >= plan.warmupBatches { samples.append(nanoseconds) }
    }
    return median(samples)
}

/// Times operations `first ..< first + ops` of `body` and returns ns/op. The values `body`
/// returns are summed and kept, so the optimiser cannot drop the work.
@inline(__always)
func timeBatch(first: Int, ops: Int, _ body: (Int) throws -> Int) rethrows -> Double {
    var sink = 0
    let start = Clock.nanoseconds()
    for index in first..<first + ops {
        sink &+= try body(index)
    }
    let elapsed = Clock.nanoseconds() - start
    keep(sink)
    return Double(elapsed) / Double(ops)
}

@inline(never)
func keep(_ value: Int) {
    if value == 0x5eed_5eed { print("", terminator: "") }
}

func median(_ samples: [Double]) -> Double {
    precondition(!samples.isEmpty, "median of no samples")
    let sorted = samples.sorted()
    let middle = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
}
