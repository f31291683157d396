import CLMDBReference
import Foundation
@_spi(Benchmarking) import GroupDefaults

/// Open + first read in a fresh process, as a notification-service extension has it.
///
/// The benchmark runs itself as `groupdefaults-bench cold-child KIND LOCATION`; the child times
/// from just before it opens the store to just after the first read returns, prints the
/// nanoseconds and exits. The parent also times each child from spawn to exit. The parent keeps
/// its own handles on the three stores open meanwhile, as a running host app would.
enum ColdStart {
    static let childCommand = "cold-child"

    enum Kind: String, CaseIterable {
        case store, raw, userdefaults
    }

    /// Where each kind's populated store is: a directory, a file, a suite name.
    struct Locations {
        var storeDirectory: String
        var rawPath: String
        var userDefaultsSuite: String

        func argument(for kind: Kind) -> String {
            switch kind {
            case .store: storeDirectory
            case .raw: rawPath
            case .userdefaults: userDefaultsSuite
            }
        }
    }

    struct Medians {
        var inProcess: [Kind: Double] = [:]
        var wholeProcess: [Kind: Double] = [:]
    }

    /// Runs one warm-up child of each kind, then `runs` rounds of one child per kind, and
    /// returns the medians.
    static func measure(_ locations: Locations, runs: Int, kinds: [Kind] = Kind.allCases) throws -> Medians {
        let executable = Spawn.executablePath()
        var inProcess: [Kind: [Double]] = [:]
        var wholeProcess: [Kind: [Double]] = [:]
        for round in 0...runs {
            for kind in kinds {
                let result = try Spawn.run(
                    executable,
                    [childCommand, kind.rawValue, locations.argument(for: kind)],
                    captureOutput: true
                )
                let output = result.output.trimmingCharacters(in: .whitespacesAndNewlines)
                guard result.status == 0, let nanoseconds = Double(output) else {
                    throw BenchError("cold start child '\(kind.rawValue)' exited with \(result.status): \(output)")
                }
                guard round > 0 else { continue }
                inProcess[kind, default: []].append(nanoseconds)
                wholeProcess[kind, default: []].append(Double(result.wallNanoseconds))
            }
        }
        return Medians(inProcess: inProcess.mapValues(median), wholeProcess: wholeProcess.mapValues(median))
    }

    /// The child: `KIND LOCATION`. Prints the ns from before the open to after the first read.
    static func runChild(arguments: [String]) throws {
        guard arguments.count == 2, let kind = Kind(rawValue: arguments[0]) else {
            throw BenchError("usage: groupdefaults-bench \(childCommand) store|raw|userdefaults LOCATION")
        }
        let location = arguments[1]
        let key = Workload.key(0)
        let nanoseconds: Int64
        let value: String?
        switch kind {
        case .store:
            // An extension opens its group's suite by name, from the default directory.
            setenv("GROUPDEFAULTS_DIR", location, 1)
            let start = Clock.nanoseconds()
            let defaults = try SharedDefaults(suiteName: StoreSubject.suiteName)
            value = defaults.string(forKey: key)
            nanoseconds = Clock.nanoseconds() - start
            // Closed after the clock stops, as the C reference leaves its environment open: without
            // this Swift may release the handle right after its last use, inside the timed span.
            withExtendedLifetime(defaults) {}
        case .raw:
            let configuration = SharedDefaults.Configuration()
            let flags = SharedDefaults.lmdbEnvironmentFlags(for: configuration)
            var error = [CChar](repeating: 0, count: 256)
            let keyBytes = Array(key.utf8)
            // The map size the store would use: never less than the file (with MDB_WRITEMAP LMDB
            // truncates the file to the map size). Looked up before the clock starts.
            var st = stat()
            let mapSize = max(configuration.initialMapSize, stat(location, &st) == 0 ? Int(st.st_size) : 0)
            nanoseconds = keyBytes.withUnsafeBytes { keyBytes in
                Int64(
                    gdref_cold_open_first_read(
                        location,
                        flags,
                        mapSize,
                        keyBytes.baseAddress,
                        keyBytes.count,
                        &error,
                        error.count
                    )
                )
            }
            guard nanoseconds >= 0 else { throw BenchError("raw LMDB at \(location): \(String(cBuffer: error))") }
            value = nil  // the C side failed above unless it found the key
        case .userdefaults:
            let start = Clock.nanoseconds()
            let defaults = try FoundationSubject.open(suiteName: location)
            value = defaults.string(forKey: key)
            nanoseconds = Clock.nanoseconds() - start
            withExtendedLifetime(defaults) {}
        }
        if kind != .raw, value != Workload.string(0, variant: 0) {
            throw BenchError("cold start child '\(kind.rawValue)' read \(value ?? "nil") for \(key)")
        }
        print(nanoseconds)
    }

    // MARK: Suite size

    /// The suite sizes cold open + first read is measured at, each beside raw LMDB at the same size.
    static let sizes = [10, 100_000]

    /// A store and a raw LMDB file of `keys` keys (the workload's keys and strings, variant 0), each
    /// kept open by the parent while the children run, as a running host app would.
    final class SizedStores {
        let keys: Int
        let locations: Locations
        private let store: SharedDefaults
        private let raw: OpaquePointer

        init(keys: Int, sandbox: Sandbox) throws {
            self.keys = keys
            let storeDirectory = try sandbox.makeDirectory("cold-start-\(keys)-groupdefaults")
            let rawPath = try sandbox.makeDirectory("cold-start-\(keys)-raw-lmdb") + "/raw.lmdb"
            store = try StoreSubject.open(directory: URL(fileURLWithPath: storeDirectory))
            try store.write { tx in
                for index in 0..<keys {
                    try tx.set(.string(Workload.string(index, variant: 0)), forKey: Workload.key(index))
                }
            }
            let configuration = SharedDefaults.Configuration()
            let flags = SharedDefaults.lmdbEnvironmentFlags(for: configuration)
            var error = [CChar](repeating: 0, count: 256)
            // Room for every key at once (the store's map grows by itself).
            let mapSize = max(configuration.initialMapSize, keys * 512)
            guard let raw = gdref_open(rawPath, flags, mapSize, &error, error.count) else {
                throw BenchError("raw LMDB at \(rawPath): \(String(cBuffer: error))")
            }
            self.raw = raw
            let dataset = try Dataset((0..<keys).map { (Workload.key($0), Array(Workload.string($0, variant: 0).utf8)) })
            guard gdref_put_all(raw, dataset.pointer) == 0 else {
                throw BenchError("raw LMDB at \(rawPath): \(String(cString: gdref_env_error(raw)))")
            }
            locations = Locations(storeDirectory: storeDirectory, rawPath: rawPath, userDefaultsSuite: "")
        }

        deinit {
            gdref_close(raw)
        }

        /// The store's pages in use, for the report.
        var storeBytes: Int { (try? store.info().usedBytes) ?? 0 }
    }

    /// Cold open + first read at each of `sizes`, store and raw LMDB alternating in every round, all
    /// sizes in one run. Returns (keys, store median, raw median) per size.
    static func measureSizes(sandbox: Sandbox, runs: Int) throws -> [(keys: Int, usedBytes: Int, store: Double, raw: Double)] {
        let stores = try sizes.map { try SizedStores(keys: $0, sandbox: sandbox) }
        return try stores.map { sized in
            let medians = try measure(sized.locations, runs: runs, kinds: [.store, .raw])
            return (sized.keys, sized.storeBytes, medians.inProcess[.store]!, medians.inProcess[.raw]!)
        }
    }
}
