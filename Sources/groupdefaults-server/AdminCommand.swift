import ArgumentParser
import CommandLineSupport
import Foundation
import GroupDefaultsServer
import GroupDefaultsWire

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `groupdefaults-server admin create|list|remove`: the operators who sign in to the console at
/// `/console`, on the same storage a running server uses. Operators are not accounts: their
/// passwords (kept as bcrypt hashes) open the console only, and sync tokens never open it.
struct AdminCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "admin",
        abstract: "Manage the operators who sign in to the console (/console).",
        discussion: "Example: groupdefaults-server admin create --name ops --config /etc/groupdefaults-server.conf",
        subcommands: [Create.self, List.self, Remove.self]
    )

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add an operator; the password is read from the terminal (twice, not shown) or from the first line of stdin.",
            discussion: """
                The password needs at least 8 characters; only its bcrypt hash is stored. The store \
                must exist (`serve` makes it) unless --create is given.

                Example: groupdefaults-server admin create --name ops --data-dir /var/lib/groupdefaults-server
                """
        )

        @OptionGroup var storage: StorageOptions
        @Option(help: "The operator's name: letters, digits, '.', '_', '-' and '@'.") var name: String
        @Flag(help: "Create the store if there is none yet (else a data directory without one is refused).") var create = false

        func run() async throws {
            try await reportingFailure {
                if let problem = Username.problem(withNew: name, kind: .operator) { throw CommandFailure(problem) }
                // A store that is not there is said before the password is asked.
                let created = try await storage.withStorage(creating: create) { store in
                    let created = try await Operators(storage: store).create(name: name, password: try PasswordInput.read())
                    try await store.appendAudit(.commandLine(.adminCreate, target: "operator \(created)"))
                    return created
                }
                print("created operator \(printable(created)): sign in at /console")
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the operators: name and when each was created.",
            discussion: "Example: groupdefaults-server admin list --data-dir /var/lib/groupdefaults-server"
        )

        @OptionGroup var storage: StorageOptions

        func run() async throws {
            try await reportingFailure {
                let operators = try await storage.withStorage { try await Operators(storage: $0).list() }
                let dates = ISO8601DateFormatter()
                for found in operators { print("\(printable(found.name))\tcreated \(dates.string(from: found.created))") }
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove an operator and end their console sessions.",
            discussion: "Example: groupdefaults-server admin remove --name ops --data-dir /var/lib/groupdefaults-server"
        )

        @OptionGroup var storage: StorageOptions
        @Option(help: "The operator's name (from `admin list`).") var name: String?
        // `admin remove NAME`, as it was before every admin verb took --name: still understood.
        @Argument(help: .hidden) var positionalName: String?

        func validate() throws {
            switch (name, positionalName) {
            case (nil, nil): throw ValidationError("Missing expected argument '--name <name>'")
            case (let option?, let positional?) where option != positional:
                throw ValidationError("two names given, '\(option)' and '\(positional)': give one, with --name")
            default: break
            }
        }

        func run() async throws {
            let name = name ?? positionalName ?? ""
            try await reportingFailure {
                try await storage.withStorage { store in
                    try await Operators(storage: store).remove(name: name)
                    try await store.appendAudit(.commandLine(.adminRemove, target: "operator \(name)"))
                }
                print("removed operator \(printable(name))")
            }
        }
    }
}

/// A password from the terminal (asked twice, echo off) or from stdin's first line.
enum PasswordInput {
    static func read() throws -> String {
        guard isatty(STDIN_FILENO) == 1 else {
            guard let line = readLine(strippingNewline: true), !line.isEmpty else {
                throw CommandFailure("no password on stdin (give it as the first line)")
            }
            return line
        }
        let first = try ask("Password: ")
        let second = try ask("Again: ")
        guard first == second else { throw CommandFailure("the two passwords differ") }
        return first
    }

    /// Prompts on stderr and reads a line from the terminal with echo off (restored after, even on failure).
    private static func ask(_ prompt: String) throws -> String {
        FileHandle.standardError.write(Data(prompt.utf8))
        var saved = termios()
        guard tcgetattr(STDIN_FILENO, &saved) == 0 else { throw CommandFailure("cannot read the terminal's settings") }
        var quiet = saved
        quiet.c_lflag &= ~tcflag_t(ECHO)
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet)
        defer {
            tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved)
            FileHandle.standardError.write(Data("\n".utf8))
        }
        guard let line = readLine(strippingNewline: true), !line.isEmpty else { throw CommandFailure("no password given") }
        return line
    }
}
