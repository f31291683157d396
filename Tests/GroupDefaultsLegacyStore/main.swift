// A store as an older version left it, for `Tools/nemesis`: a token for an account name that the
// name rules of today refuse (another spelling of an existing name, such as KELVIN SIGN `K` beside
// `K`), written straight into the server's storage as a version before those rules did.
// docs/reference/names.md promises such names keep working, each its own account, compared by its bytes.
//
//   GroupDefaultsLegacyStore token (--data-dir DIR | --postgres-url URL) ACCOUNT [DEVICE]
//
// Prints the token (stdout's only line); exit status 1 with one line on stderr on failure.
import Foundation
import GroupDefaultsServer
import Logging

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("GroupDefaultsLegacyStore: \(message)\n".utf8))
    exit(1)
}

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count >= 4, arguments.count <= 5, arguments[0] == "token" else {
    fail("usage: GroupDefaultsLegacyStore token (--data-dir DIR | --postgres-url URL) ACCOUNT [DEVICE]")
}
let account = arguments[3]
let device = arguments.count == 5 ? arguments[4] : nil
do {
    let storage: any ServerStorage
    switch arguments[1] {
    case "--data-dir": storage = try LMDBSyncStorage(directory: arguments[2])
    case "--postgres-url":
        storage = try await PostgresSyncStorage.start(
            try PostgresStorageConfiguration(url: arguments[2]),
            logger: Logger(label: "legacy-store")
        )
    default: fail("give --data-dir DIR or --postgres-url URL")
    }
    let made = Tokens.make(account: account, suitePatterns: ["*"], readOnly: false, device: device, expires: nil)
    do {
        try await storage.createToken(made.stored)
        try await storage.shutdown()
    } catch {
        try? await storage.shutdown()
        throw error
    }
    print(made.token)
} catch {
    fail("\(error)")
}
