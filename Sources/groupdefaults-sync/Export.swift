import ArgumentParser
import CommandLineSupport
import Foundation
import GroupDefaultsSync
import GroupDefaultsWire

/// `groupdefaults-sync export SUITE…`: what the server holds of these suites, as the device's token
/// reaches it, in the shape of `groupdefaults-server accounts export` (docs/guide/operating.md,
/// "Accounts: listing, export, deletion, and the audit log").
struct Export: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print what the server holds of these suites as one JSON document.",
        discussion: """
            Each suite's entries (tombstones too) and each key's history, as the server keeps \
            them, its key bags, and the devices the token sees: read a page (1,000) at a time, a \
            few requests per suite whatever its size. Entries of an end-to-end encrypted \
            suite are as stored, sealed: this device's keys open them. With --to it is written to \
            a new file, mode 0600; a path that exists is refused.

            Example: groupdefaults-sync export group.com.example.chat --to chat-export.json
            """
    )

    @OptionGroup var options: SuiteOptions
    @OptionGroup var server: ServerOptions
    @Argument(help: "The suite names.") var suites: [String]
    @Option(help: ArgumentHelp("Write to this new file instead of stdout.", valueName: "FILE")) var to: String?

    func validate() throws {
        guard !suites.isEmpty else { throw ValidationError("name at least one suite") }
    }

    func run() async throws {
        if let to, FileManager.default.fileExists(atPath: to) {
            try await perform { throw CommandFailure("cannot create \(to): it exists (give a new path)") }
            return
        }
        var document = DeviceExport(exported: DeviceExport.date(Date()), suites: [], devices: [])
        var devices: [String: DeviceInfo] = [:]
        // A suite named twice is exported once; two names are two by their bytes (KELVIN SIGN `K` is not `K`).
        var seen = Set<ExactName>()
        for suite in suites where seen.insert(suite.exact).inserted {
            try await withConfiguredEngine(options, server, suite) { _, engine in
                document.suites.append(try await DeviceExport.suite(suite, from: engine.client))
                for device in try await engine.client.devices().devices { devices[device.id] = device }
            }
        }
        document.devices = devices.values.sorted { $0.id < $1.id }
        try await perform {
            let text = try document.json() + Data("\n".utf8)
            if let to { try NewPrivateFile.create(text, at: to) } else { writeAll(text, to: STDOUT_FILENO) }
        }
    }
}

/// The document `groupdefaults-sync export` writes: the account export's header and suites
/// (`AccountExportDocument`), as the API serves them (key bags as `GET key-bags` answers), without
/// the account's tokens, memberships and pairings.
typealias DeviceExport = AccountExportDocument<KeyBags>

extension AccountExportDocument where KeyBags == GroupDefaultsWire.KeyBags {
    /// Reads the suite's snapshot, then the history of all its keys, page by page (a request per
    /// page, not per key), then its key bags.
    static func suite(_ name: String, from client: SyncClient) async throws -> Suite {
        var entries: [SyncEntry] = []
        var after: String?
        var head: UInt64 = 0
        repeat {
            let page = try await client.snapshot(after: after)
            entries += page.entries
            head = page.headRev
            after = page.next
        } while after != nil
        var history: [KeyHistory] = []
        repeat {
            let page = try await client.history(after: after)
            history += page.history
            after = page.next
        } while after != nil
        let sealed = entries.contains { $0.sealed != nil }
        return Suite(name: name, headRev: head, entries: entries, history: history, keyBags: sealed ? try await client.keyBags() : nil)
    }
}
