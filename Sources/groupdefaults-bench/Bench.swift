import Foundation
import Logging

/// `groupdefaults-bench`: GroupDefaults beside raw LMDB (C, same flags) and Foundation's
/// `UserDefaults(suiteName:)`, all measured in one run; `groupdefaults-bench server`: the sync
/// server's real executable on loopback (`Server/`); `groupdefaults-bench sync`: two devices
/// syncing through it (`Sync/`).
///
/// The benchmark runs in a child of itself whose HOME and XDG directories point into a
/// temporary sandbox (Foundation reads them only at start-up), so that nothing of the user's
/// is touched; the parent removes the sandbox when the child ends.
@main
struct Bench {
    static func main() {
        do {
            let arguments = Array(CommandLine.arguments.dropFirst())
            if arguments.first == ColdStart.childCommand {
                try ColdStart.runChild(arguments: Array(arguments.dropFirst()))
                return
            }
            if arguments.first == NotifyChild.command {
                try NotifyChild.run(arguments: Array(arguments.dropFirst()))
                return
            }
            if arguments.first == ServerBench.command {
                try runServerBench(arguments: arguments)
                return
            }
            if arguments.first == SyncBench.command {
                try runSyncBench(arguments: arguments)
                return
            }
            let options = try Options(parsing: arguments)
            if options.showHelp {
                print(Options.usage)
                return
            }
            guard let sandbox = Sandbox.current else {
                exit(try Sandbox.runInside(arguments: arguments))
            }
            let report = try Benchmark(options: options, sandbox: sandbox).run()
            print(options.json ? try report.json() : report.table())
        } catch {
            FileHandle.standardError.write(Data("groupdefaults-bench: \(error)\n".utf8))
            exit(1)
        }
    }
}

/// `groupdefaults-bench server …`: the sync server, in the same sandbox (its data directory and
/// the durable LMDB reference live there).
private func runServerBench(arguments: [String]) throws {
    let options = try ServerBench.Options(parsing: Array(arguments.dropFirst()))
    if options.showHelp {
        print(ServerBench.Options.usage)
        return
    }
    guard let sandbox = Sandbox.current else {
        exit(try Sandbox.runInside(arguments: arguments))
    }
    let report = try runBlocking { try await ServerBench(options: options, sandbox: sandbox).run() }
    print(options.json ? try report.json() : options.markdown ? report.markdown() + "\n\n" + report.table() : report.table())
}

/// `groupdefaults-bench sync …`: two devices syncing through the server, in the sandbox.
private func runSyncBench(arguments: [String]) throws {
    let options = try SyncBench.Options(parsing: Array(arguments.dropFirst()))
    if options.showHelp {
        print(SyncBench.Options.usage)
        return
    }
    guard let sandbox = Sandbox.current else {
        exit(try Sandbox.runInside(arguments: arguments))
    }
    // The engines' logs go to stderr, warnings only: stdout is the report.
    LoggingSystem.bootstrap { label in
        var handler = StreamLogHandler.standardError(label: label)
        handler.logLevel = .warning
        return handler
    }
    let report = try runBlocking { try await SyncBench(options: options, sandbox: sandbox).run() }
    print(options.json ? try report.json() : report.table())
}

/// The command line, parsed by hand: `[--json] [--quick] [--only NAME[,NAME…]]`.
struct Options {
    var json = false
    var quick = false
    var only: [Operation]? = nil
    var showHelp = false

    static let usage = """
        usage: groupdefaults-bench [--json] [--quick] [--only NAME[,NAME...]]
               groupdefaults-bench server [--json | --markdown] [--quick] [--only embedded|postgres]   (server --help)
               groupdefaults-bench sync [--json] [--quick]   (two devices syncing through the server)
          --json    print the results as JSON instead of a table
          --quick   few batches and cold starts (a smoke test; figures are rough)
          --only    run only these operations: \(Operation.allCases.map(\.rawValue).joined(separator: ", "))
        """

    init(parsing arguments: [String]) throws {
        var rest = arguments[...]
        while let argument = rest.popFirst() {
            switch argument {
            case "--json": json = true
            case "--quick": quick = true
            case "-h", "--help": showHelp = true
            case "--only":
                guard let names = rest.popFirst() else { throw BenchError("--only needs a name\n\(Self.usage)") }
                only = (only ?? []) + (try Self.operations(named: names))
            default:
                if argument.hasPrefix("--only=") {
                    only = (only ?? []) + (try Self.operations(named: String(argument.dropFirst("--only=".count))))
                } else {
                    throw BenchError("unknown argument '\(argument)'\n\(Self.usage)")
                }
            }
        }
    }

    private static func operations(named list: String) throws -> [Operation] {
        try list.split(separator: ",").map { name in
            guard let operation = Operation(rawValue: String(name)) else {
                throw BenchError("unknown operation '\(name)'\n\(usage)")
            }
            return operation
        }
    }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

extension String {
    /// The UTF-8 text of a C buffer, up to its first NUL.
    init(cBuffer: some Sequence<CChar>) {
        self.init(decoding: cBuffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
