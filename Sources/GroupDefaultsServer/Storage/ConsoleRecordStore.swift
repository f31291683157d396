/// The kinds of record the console keeps in storage: operators and their sign-in sessions.
package enum ConsoleRecordKind: String, Sendable, CaseIterable {
    case `operator`, session
}

/// The console's state: operators and sessions, as opaque records (`ConsoleRecords` gives them
/// meaning).
package protocol ConsoleRecordStore: Sendable {
    /// The console's record of `kind` named `name`, if any.
    func consoleRecord(_ kind: ConsoleRecordKind, name: String) async throws -> [UInt8]?
    /// Every console record of `kind`, by name.
    func consoleRecords(_ kind: ConsoleRecordKind) async throws -> [(name: String, value: [UInt8])]
    /// Stores a console record; with `onlyIfNew`, a record that exists is left as it is and the
    /// answer is false.
    func putConsoleRecord(_ kind: ConsoleRecordKind, name: String, value: [UInt8], onlyIfNew: Bool) async throws -> Bool
    /// Removes a console record; false if there was none.
    func deleteConsoleRecord(_ kind: ConsoleRecordKind, name: String) async throws -> Bool
}
