/// Where the server keeps its data.
package enum StorageConfiguration: Sendable {
    /// The embedded LMDB store in this directory (created with mode 0700): one server process.
    case embedded(directory: String)
    /// PostgreSQL: several stateless server processes may share the database.
    case postgres(PostgresStorageConfiguration)
}

/// A storage setting that cannot work (a malformed PostgreSQL URL, say), found before anything is
/// opened.
package struct StorageConfigurationError: Error, CustomStringConvertible {
    package var description: String

    package init(_ description: String) { self.description = description }
}

/// The storage could not be opened when the server started (the database is unreachable, or
/// refused the migration): the server does not start.
package struct StorageStartError: Error, CustomStringConvertible {
    package var description: String
    /// A line for each thing tried (each host of a PostgreSQL URL that names several).
    package var details: [String]

    package init(_ description: String, details: [String] = []) {
        self.description = description
        self.details = details
    }
}
