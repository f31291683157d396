import GroupDefaultsServer
import Logging
import TestSupport

extension PostgresFixture {
    /// A storage instance (a server instance, as far as the database is concerned) on `url`.
    static func storage(url: String) async throws -> PostgresSyncStorage {
        try await PostgresSyncStorage.start(try PostgresStorageConfiguration(url: url), logger: logger)
    }

    static let logger: Logger = {
        var logger = Logger(label: "groupdefaults-server-tests")
        logger.logLevel = .error
        return logger
    }()
}
