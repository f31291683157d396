import Logging
import PostgresNIO

/// How a statement is planned. Prepared statements (a Bind and an Execute per run, no parsing)
/// take PostgreSQL's default plan caching (`plan_cache_mode = auto`): after five runs planned with
/// their parameters, a generic plan is kept for the connection when it costs no more, and made
/// again whenever the planner statistics of a table it uses were updated (PostgreSQL's `PREPARE`
/// documentation; autovacuum's `ANALYZE` updates them as a table grows). `PostgresPlanTests` grows
/// the tables under a connection's cached push statements and reads the plans it then uses: the
/// statements are written so that their only usable indexes serve them well at any size (primary
/// keys, per-key lookups, rows deleted by row id). A push's statements over a large group, and
/// `changes` (`OneShotStatement`: its best plan depends on the suite it reads), run as one-shot queries instead (the unnamed statement, planned with its parameters at
/// each run): a generic plan is made for a guess of an array parameter's size rather than its
/// real one, and with every plan cached, batches of 100 ran at about half their speed (below; the
/// cached plans themselves were not examined).
///
/// Measured (`Tools/bench server --only postgres --quick`, one run each): every statement planned
/// at each run, single-op pushes at 10 connections 1,505/s, batches of 100 with 100 clients
/// 28,000 ops/s; every statement with a cached plan 2,317/s but 16,000 ops/s.
enum PlannedStatement {
    /// The most pushes, or ops, of a group whose statements run prepared.
    static let largestPreparedGroup = 8
}

/// A statement that can run as a one-shot query: the unnamed statement, planned with its
/// parameters at each run. `ChangesStatement` runs only so (its best plan depends on which suite
/// it reads, and the partial index `entries_by_live_rev`, `rev > 0`, serves only a plan made with a
/// known bound on `rev`): it is not a `PostgresPreparedStatement`, so that it cannot be run
/// prepared. A push's statements are both, and run one way or the other (`rows(of:planningEach:)`).
protocol OneShotStatement: Sendable {
    associatedtype Row
    /// The statement's text, with `$1`, `$2`, … for its bindings.
    static var sql: String { get }
    func makeBindings() throws -> PostgresBindings
    func decodeRow(_ row: PostgresRow) throws -> Row
}

extension OneShotStatement {
    /// The statement with its bindings, as a one-shot query.
    func oneShotQuery() throws -> PostgresQuery {
        PostgresQuery(unsafeSQL: Self.sql, binds: try makeBindings())
    }
}

extension PostgresClient {
    /// The rows of `statement` as a one-shot query, planned with its parameters at each run.
    func rowsPlanningEach<Statement: OneShotStatement>(
        of statement: Statement,
        logger: Logger
    ) async throws -> AsyncThrowingMapSequence<PostgresRowSequence, Statement.Row> {
        try await query(statement.oneShotQuery(), logger: logger).map { try statement.decodeRow($0) }
    }
}

extension PostgresConnection {
    /// The rows of `statement`: prepared (its plan cached, see `PlannedStatement`), or, with
    /// `planningEach`, as a one-shot query planned with its parameters.
    func rows<Statement: PostgresPreparedStatement & OneShotStatement>(
        of statement: Statement,
        planningEach: Bool,
        logger: Logger
    ) async throws -> AsyncThrowingMapSequence<PostgresRowSequence, Statement.Row> {
        guard planningEach else { return try await execute(statement, logger: logger) }
        return try await query(statement.oneShotQuery(), logger: logger).map { try statement.decodeRow($0) }
    }
}
