import CLMDBReference
import Foundation
@_spi(Benchmarking) import GroupDefaults

/// One run: the three stores, each in a fresh location of the sandbox, through every operation.
struct Benchmark {
    let options: Options
    let sandbox: Sandbox

    func run() throws -> Report {
        let workload = Workload()
        let configuration = SharedDefaults.Configuration()
        let flags = SharedDefaults.lmdbEnvironmentFlags(for: configuration)
        let mapSize = configuration.initialMapSize

        let storeDirectory = try sandbox.makeDirectory("groupdefaults")
        let rawPath = try sandbox.makeDirectory("raw-lmdb") + "/raw.lmdb"
        let suiteName = "groupdefaults-bench-\(getpid())"
        let store = try StoreSubject(directory: storeDirectory, workload: workload)
        let raw = try RawSubject(path: rawPath, flags: flags, mapSize: mapSize, workload: workload)
        let foundation = try FoundationSubject(suiteName: suiteName, workload: workload)
        defer { foundation.defaults.removePersistentDomain(forName: suiteName) }

        let operations = Operation.allCases.filter { options.only?.contains($0) ?? true }
        var rows: [Report.Row] = []
        for operation in operations where ![.coldStart, .notify, .sync].contains(operation) {
            progress(operation.label)
            let groupDefaults = try measure(operation, on: store)
            let rawLMDB = try measure(operation, on: raw)
            let userDefaults = try measure(operation, on: foundation)
            rows.append(Report.Row(operation, groupDefaults: groupDefaults, rawLMDB: rawLMDB, userDefaults: userDefaults))
            if operation == .setString {
                // The floor under a set: its LMDB calls with no Swift, beside the one put of raw LMDB.
                // An environment of its own, with room for the log's 10,000 records (the store grows its map).
                let setCalls = try RawSubject(
                    path: try sandbox.makeDirectory("raw-lmdb-set-calls") + "/raw.lmdb",
                    flags: flags,
                    mapSize: 64 << 20,
                    workload: workload
                )
                try setCalls.populate(.strings)
                let calls = try setCalls.measureSetCalls(plan(operation, for: setCalls))
                rows.append(
                    Report.Row(
                        measured: "set-string-lmdb-calls",
                        label: "set string's LMDB calls alone, in C",
                        groupDefaults: calls,
                        rawLMDB: rawLMDB,
                        note: "log tail, meta get, tombstone count, value and log puts, log trim, commit",
                        target: nil
                    )
                )
                rows.append(
                    Report.Row(
                        measured: "set-string-over-floor",
                        label: "set string over its floor (raw column: the floor)",
                        groupDefaults: groupDefaults,
                        rawLMDB: calls,
                        note: "the store's Swift work on top of its LMDB calls",
                        target: .timesFloor(1.2)
                    )
                )
            }
        }
        if operations.contains(.coldStart) {
            progress(Operation.coldStart.label)
            for subject in [store, raw, foundation] as [any Subject] {
                try subject.populate(.strings)
            }
            let locations = ColdStart.Locations(storeDirectory: storeDirectory, rawPath: rawPath, userDefaultsSuite: suiteName)
            let medians = try ColdStart.measure(locations, runs: coldStartRuns)
            rows.append(
                Report.Row(
                    .coldStart,
                    groupDefaults: medians.inProcess[.store]!,
                    rawLMDB: medians.inProcess[.raw]!,
                    userDefaults: medians.inProcess[.userdefaults]!
                )
            )
            rows.append(
                Report.Row(
                    wholeProcess: "cold start, whole process",
                    groupDefaults: medians.wholeProcess[.store]!,
                    rawLMDB: medians.wholeProcess[.raw]!,
                    userDefaults: medians.wholeProcess[.userdefaults]!
                )
            )
            for sized in try ColdStart.measureSizes(sandbox: sandbox, runs: coldStartRuns) {
                let keys = sized.keys.formatted(.number.grouping(.automatic).locale(Locale(identifier: "en_US")))
                rows.append(
                    Report.Row(
                        measured: "cold-start-\(sized.keys)-keys",
                        label: "cold open + first read, \(keys) keys",
                        groupDefaults: sized.store,
                        rawLMDB: sized.raw,
                        note: "suite of \(keys) keys (\(sized.usedBytes >> 10) KiB in use), raw LMDB at the same size",
                        target: Operation.coldStart.target
                    )
                )
            }
            let serviceDirectory = try sandbox.makeDirectory("notification-service")
            if let service = try NotificationServiceRun.measure(in: serviceDirectory, runs: coldStartRuns) {
                rows.append(
                    Report.Row(
                        only: "notification-service-process",
                        label: "notification service, whole process",
                        groupDefaults: service,
                        note: "spawn → exit: read the sound, rewrite a payload"
                    )
                )
            }
        }
        if operations.contains(.sync) {
            rows += SyncHooks.rows(
                try SyncHooks.measure(
                    sandbox: sandbox,
                    workload: workload,
                    raw: raw,
                    quick: options.quick,
                    progress: progress
                )
            )
        }
        var notifications: Notifications.Summary?
        if operations.contains(.notify) {
            let summary = try Notifications.measure(
                sandbox: sandbox,
                workload: workload,
                quick: options.quick,
                progress: progress
            )
            rows += Notifications.rows(summary)
            notifications = summary
        }
        return Report(
            lmdbFlags: describe(flags),
            mapSize: mapSize,
            keys: Workload.keyCount,
            method: method,
            rows: rows,
            notifications: notifications
        )
    }

    private var batches: Int { options.quick ? 5 : 41 }
    private var foundationWriteBatches: Int { options.quick ? 5 : 21 }
    private var coldStartRuns: Int { options.quick ? 5 : 21 }
    /// Each UserDefaults write rewrites the whole property list: milliseconds with 1,000 keys.
    private let foundationSetsPerBatch = 20
    private let foundationWritesOf100PerBatch = 2

    private var method: [String] {
        [
            "medians of \(batches) batches of \(Workload.keyCount) ops (write 100 keys: "
                + "\(Workload.keyCount / Workload.keysPerWrite)) after a warm-up batch",
            "UserDefaults' writes: \(foundationWriteBatches) batches of \(foundationSetsPerBatch) ops "
                + "(write 100 keys: \(foundationWritesOf100PerBatch))",
            "cold start: \(coldStartRuns) fresh processes per store after a warm-up one; "
                + "the benchmark keeps the stores open meanwhile",
        ]
    }

    /// Batches of 1,000 operations (100 writes of 100 keys), fewer for UserDefaults' writes,
    /// each of which rewrites its whole property list.
    private func plan(_ operation: Operation, for subject: any Subject) -> Plan {
        let isFoundation = subject is FoundationSubject
        switch operation {
        case .getInteger, .getString:
            return Plan(batches: batches, opsPerBatch: Workload.keyCount)
        case .setInteger, .setString, .update:
            return isFoundation
                ? Plan(batches: foundationWriteBatches, opsPerBatch: foundationSetsPerBatch)
                : Plan(batches: batches, opsPerBatch: Workload.keyCount)
        case .write100:
            return isFoundation
                ? Plan(batches: foundationWriteBatches, opsPerBatch: foundationWritesOf100PerBatch)
                : Plan(batches: batches, opsPerBatch: Workload.keyCount / Workload.keysPerWrite)
        case .coldStart, .notify, .sync:
            return Plan(batches: 0, opsPerBatch: 0)
        }
    }

    private func measure(_ operation: Operation, on subject: any Subject) throws -> Double {
        let plan = plan(operation, for: subject)
        try subject.populate(operation.valueKind)
        let nanoseconds = try subject.measure(operation, plan)
        try subject.verify(operation, totalOps: plan.totalOps)
        return nanoseconds
    }

    private func describe(_ flags: UInt32) -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        gdref_describe_flags(flags, &buffer, buffer.count)
        return String(cBuffer: buffer)
    }

    private func progress(_ message: String) {
        FileHandle.standardError.write(Data("groupdefaults-bench: \(message)…\n".utf8))
    }
}
