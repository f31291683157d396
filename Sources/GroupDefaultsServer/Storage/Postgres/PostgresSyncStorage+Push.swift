import Foundation
package import GroupDefaultsWire
import Logging
import PostgresNIO

extension PostgresSyncStorage {
    /// Group commit (`PushGroups`): the push goes with the other pushes to its suite that wait on
    /// this instance, and `writeGroup` applies them, each with its own outcome.
    package func push(account: String, suite: String, push: PreparedPush, quota: SuiteQuota, serverTime: String) async throws -> PushResponse {
        let pushed = GroupedPush(account: account, suite: suite, push: push, quota: quota, serverTime: serverTime)
        return try await pushGroups.push(pushed) { group in await self.writeGroup(group) }
    }

    /// Applies a group of pushes to one suite, in order, as if each came alone: one statement reads
    /// the suite (counters, the batch records of the group's ids, the held entries of its keys), the
    /// push step runs for each push in Swift, and one statement writes what they did and notifies
    /// every instance, on condition that the suite did not move since the read (it holds no lock in
    /// between). If it moved (another instance pushed, or a key bag changed its epoch), the group runs
    /// again in a transaction that locks the suite's row first. Returns one result per push.
    func writeGroup(_ group: [GroupedPush]) async -> [Result<PushResponse, any Error>] {
        let write = GroupWrite(group: group, logger: logger)
        do {
            let plan = try await bounded("pushing") { storage in
                try await storage.client.withConnection { connection in
                    if let plan = try await write.runOptimistically(connection) { return plan }
                    return try await connection.withTransaction(logger: storage.logger) { connection in
                        try await write.runLocked(connection)
                    }
                }
            }
            if let head = plan.advancedTo {
                signals.signal(SuiteID(account: write.account, suite: write.suite), head: head)
            }
            return plan.results
        } catch {
            return group.map { _ in .failure(error) }
        }
    }

    package func purgeTombstones(olderThan horizon: HLC) async throws -> Int {
        let horizonText = String(horizon.rawValue)
        let affected = try await bounded("finding old tombstones") { storage in
            let rows = try await storage.client.query(
                """
                SELECT DISTINCT account, suite FROM entries WHERE value IS NULL AND deleted AND hlc < \(horizonText)::numeric
                """,
                logger: storage.logger
            )
            var suites: [SuiteID] = []
            for try await (account, suite) in rows.decode((String, String).self) {
                suites.append(SuiteID(account: account, suite: suite))
            }
            return suites
        }
        var removed = 0
        for id in affected {
            // Per suite, the suite row first: the lock order of a push.
            removed += try await bounded("purging tombstones") { storage in
                try await storage.client.withTransaction(logger: storage.logger) { connection in
                    try await connection.query(
                        "SELECT 1 FROM suites WHERE account = \(id.account) AND suite = \(id.suite) FOR UPDATE",
                        logger: storage.logger
                    )
                    let rows = try await connection.query(
                        """
                        WITH purged AS (
                            DELETE FROM entries WHERE account = \(id.account) AND suite = \(id.suite)
                                AND value IS NULL AND deleted AND hlc < \(horizonText)::numeric
                            RETURNING rev
                        ), counted AS (SELECT count(*) AS n, max(rev) AS max_rev FROM purged)
                        UPDATE suites SET oldest_valid_rev = GREATEST(oldest_valid_rev, counted.max_rev)
                        FROM counted WHERE account = \(id.account) AND suite = \(id.suite) AND counted.n > 0
                        RETURNING counted.n
                        """,
                        logger: storage.logger
                    )
                    var count = 0
                    for try await n in rows.decode(Int64.self) { count += Int(n) }
                    return count
                }
            }
        }
        // Batch records as old as the horizon: a retry that late re-applies its ops, which LWW then
        // finds already stored (superseded), so nothing changes.
        let horizonSeconds = Double(horizon.milliseconds) / 1000
        try await bounded("purging batch records") { storage in
            try await storage.client.query(
                "DELETE FROM batches WHERE created < to_timestamp(\(horizonSeconds))",
                logger: storage.logger
            )
        }
        // History versions as old as the horizon, unless they are their key's current entry.
        try await bounded("purging history") { storage in
            try await storage.client.query(
                """
                DELETE FROM history h WHERE h.hlc < \(horizonText)::numeric AND NOT EXISTS (
                    SELECT 1 FROM entries e
                    WHERE e.account = h.account AND e.suite = h.suite AND e.key = h.key AND e.rev = h.rev)
                """,
                logger: storage.logger
            )
        }
        return removed
    }
}

/// What a group's write did: one result per push, and the head it moved the suite to (nil if it
/// did not move: who to wake).
struct GroupPlan: Sendable {
    var results: [Result<PushResponse, any Error>]
    var advancedTo: UInt64?
}

/// The statements of one group of pushes to one suite (`PostgresSyncStorage.writeGroup`).
private struct GroupWrite: Sendable {
    let group: [GroupedPush]
    let logger: Logger

    var account: String { group[0].account }
    var suite: String { group[0].suite }

    /// Whether the group's statements run as one-shot queries, planned with their parameters,
    /// rather than prepared (`PlannedStatement`): a group of more than a few pushes or ops, whose
    /// arrays a cached plan (made for a guess of their size) served badly in the benchmark.
    var plansEachStatement: Bool {
        group.count > PlannedStatement.largestPreparedGroup
            || group.reduce(0) { $0 + $1.push.request.ops.count } > PlannedStatement.largestPreparedGroup
    }

    /// A batch record's key: the device and its batch id.
    struct BatchKey: Hashable {
        var device: UInt64
        var batchID: String
    }

    /// The suite as the read found it.
    struct Found {
        var counters = PushStep.Counters(head: 0, keys: 0, bytes: 0)
        var held: [ExactName: StoredEntry] = [:]
        /// The recorded batches of the group's ids: digest (hex) and response (JSON).
        var batches: [BatchKey: (digest: String, response: String)] = [:]
        /// The pushes refused for their authority (`unauthorized`), by index; none when the write
        /// statement checks it (`GroupWriteStatement`).
        var unauthorized: [Int: SyncStorageError] = [:]
        /// The group's keys the suite pins (`PinRule`), read when a member pushes.
        var pinned: Set<ExactName> = []
    }

    /// What the group writes: the final entry of each key it changed, every version it made (each
    /// key's last `historyDepth`), the suite's counters after it, and a batch record per applied push.
    struct Output {
        var results: [Result<PushResponse, any Error>] = []
        var order: [ExactName] = []
        var entries: [ExactName: StoredEntry] = [:]
        var versions: [StoredEntry] = []
        var counters: PushStep.Counters
        var advanced = false
        var batchDevices: [String] = []
        var batchIDs: [String] = []
        var batchDigests: [String] = []
        var batchResponses: [String] = []

        /// Whether anything is to be written: a push was applied (a replayed or refused one writes nothing).
        var writes: Bool { !batchIDs.isEmpty }
    }

    /// Read, decide, write on condition; nil when the suite moved between the read and the write
    /// (the group is then to run locked), also when another instance recorded one of the group's
    /// batch ids meanwhile.
    func runOptimistically(_ connection: PostgresConnection) async throws -> GroupPlan? {
        // Pushes checked against two incarnations of the owner: one of them is not the owner's.
        guard Set(group.compactMap(\.push.authority?.ownerIncarnation)).count <= 1 else { return nil }
        let found = try await read(connection)
        let output = decide(found)
        guard output.writes else { return GroupPlan(results: output.results, advancedTo: nil) }
        do {
            guard try await write(output, expected: found.counters, connection) else { return nil }
        } catch let error as PSQLError where error.serverInfo?[.sqlState] == PostgresError.Code.uniqueViolation.raw {
            return nil
        }
        return GroupPlan(results: output.results, advancedTo: output.advanced ? output.counters.head : nil)
    }

    /// The same inside a transaction that first creates and locks the suite's row: the pushes of
    /// other instances wait for it, so the write's condition holds.
    func runLocked(_ connection: PostgresConnection) async throws -> GroupPlan {
        // The tokens and the incarnation first, as an account's deletion takes them (before the
        // suite's row); a group all refused makes no row for a suite of a deleted account.
        let unauthorized = try await unauthorized(connection)
        if unauthorized.count == group.count {
            return GroupPlan(results: group.indices.map { .failure(unauthorized[$0]!) }, advancedTo: nil)
        }
        try await connection.query(
            "INSERT INTO suites (account, suite) VALUES (\(account), \(suite)) ON CONFLICT DO NOTHING",
            logger: logger
        )
        try await connection.query(
            "SELECT 1 FROM suites WHERE account = \(account) AND suite = \(suite) FOR UPDATE",
            logger: logger
        )
        var found = try await read(connection)
        found.unauthorized = unauthorized
        let output = decide(found)
        if output.writes {
            guard try await write(output, expected: found.counters, connection) else {
                throw SyncStorageError(.unavailable, "suite \(suite) changed while its row was locked")
            }
        }
        return GroupPlan(results: output.results, advancedTo: output.advanced ? output.counters.head : nil)
    }

    /// The member accounts whose pushes the group holds, each once (by their bytes).
    var memberAccounts: [String] {
        Set(group.compactMap { $0.push.authority == nil ? nil : $0.push.account?.exact }).map(\.text)
    }

    /// The pushes of the group whose authority (`PushAuthority`) no longer holds, by index, with
    /// why: their tokens and the owner's incarnation are locked FOR KEY SHARE until the transaction
    /// ends (as in `GroupWriteStatement`).
    private func unauthorized(_ connection: PostgresConnection) async throws -> [Int: SyncStorageError] {
        let tokenIDs = Array(Set(group.compactMap(\.push.authority?.tokenID)))
        var held = Set<String>()
        if !tokenIDs.isEmpty {
            let rows = try await connection.query(
                "SELECT id FROM tokens WHERE id = ANY(\(tokenIDs)) AND revoked IS NULL FOR KEY SHARE",
                logger: logger
            )
            for try await id in rows.decode(String.self) { held.insert(id) }
        }
        var incarnation: String?
        let rows = try await connection.query("SELECT id FROM account_incarnations WHERE account = \(account) FOR KEY SHARE", logger: logger)
        for try await id in rows.decode(String.self) { incarnation = id }
        var writers = Set<ExactName>()
        var readers = Set<ExactName>()
        let members = memberAccounts
        if !members.isEmpty {
            let rows = try await connection.query(
                """
                SELECT account, record->>'role' = 'read' OR coalesce((record->>'awaitingKeys')::boolean, false)
                FROM members WHERE owner = \(account) AND suite = \(suite) AND account = ANY(\(members)) FOR KEY SHARE
                """,
                logger: logger
            )
            for try await (member, readsOnly) in rows.decode((String, Bool).self) {
                if readsOnly { readers.insert(member.exact) } else { writers.insert(member.exact) }
            }
        }
        var refused: [Int: SyncStorageError] = [:]
        for (index, pushed) in group.enumerated() {
            guard let authority = pushed.push.authority else { continue }
            if !held.contains(authority.tokenID) {
                refused[index] = PushAuthority.tokenGone()
            } else if let expected = authority.ownerIncarnation, Array(expected.utf8) != incarnation.map({ Array($0.utf8) }) {
                refused[index] = PushAuthority.ownerGone(account)
            } else if let member = pushed.push.account?.exact, !writers.contains(member) {
                refused[index] = readers.contains(member) ? PushAuthority.memberReads(account, suite) : PushAuthority.memberGone(account, suite)
            }
        }
        return refused
    }

    /// `SuiteReadStatement`: the suite's counters, the held entries of the group's keys, the recorded
    /// batches of its ids.
    private func read(_ connection: PostgresConnection) async throws -> Found {
        var keys = Set<ExactName>()
        for pushed in group { for op in pushed.push.request.ops { keys.insert(op.key.exact) } }
        let rows = try await connection.rows(
            of: SuiteReadStatement(
                account: account,
                suite: suite,
                keys: keys.map(\.text),
                devices: group.map { String($0.push.request.deviceID) },
                batchIDs: group.map(\.push.request.batchID)
            ),
            planningEach: plansEachStatement,
            logger: logger
        )
        var found = Found()
        if group.contains(where: { $0.push.account != nil }) {
            let pinned = try await PostgresSyncStorage.pinnedKeys(connection, owner: account, suite: suite, among: keys.map(\.text), logger: logger)
            found.pinned = Set(pinned.map(\.exact))
        }
        for try await row in rows {
            switch row.0 {
            case 0:
                found.counters = PushStep.Counters(
                    head: UInt64(row.8 ?? 0),
                    keys: Int(row.9 ?? 0),
                    bytes: Int(row.10 ?? 0),
                    epoch: UInt32(clamping: row.4 ?? 0),
                    modeRev: row.6.flatMap(UInt64.init) ?? 0
                )
            case 1:
                guard let key = row.1, let hlc = row.6, let origin = row.7, let rev = row.8 else { continue }
                found.held[key.exact] = try EntryRow.stored(key: key, (row.2, row.3, row.4, row.5, hlc, origin, rev, row.11))
            default:
                guard let batchID = row.1, let response = row.2, let digest = row.6, let device = row.7.flatMap(UInt64.init)
                else { continue }
                found.batches[BatchKey(device: device, batchID: batchID)] = (digest, response)
            }
        }
        return found
    }

    /// The push step for each push in turn, each seeing what the earlier ones did; a push it refuses
    /// gets its error and changes nothing for the others.
    private func decide(_ found: Found) -> Output {
        var output = Output(counters: found.counters)
        var held = found.held
        /// The batches this group applied, for a repeat of the same id within the group.
        var applied: [BatchKey: (digest: [UInt8], response: PushResponse)] = [:]
        var versions: [StoredEntry] = []
        for (index, pushed) in group.enumerated() {
            if let refusal = found.unauthorized[index] {
                output.results.append(.failure(refusal))
                continue
            }
            let push = pushed.push
            let request = push.request
            let batchKey = BatchKey(device: request.deviceID, batchID: request.batchID)
            let recorded: PushStep.RecordedBatch?
            if let earlier = applied[batchKey] {
                recorded = PushStep.RecordedBatch(digest: earlier.digest) { earlier.response }
            } else if let stored = found.batches[batchKey] {
                recorded = PushStep.RecordedBatch(digest: stored.digest == Hex.string(push.digest) ? push.digest : []) {
                    try JSONDecoder().decode(PushResponse.self, from: Data(stored.response.utf8))
                }
            } else {
                recorded = nil
            }
            var pushHeld: [ExactName: StoredEntry] = [:]
            for op in request.ops { if let entry = held[op.key.exact] { pushHeld[op.key.exact] = entry } }
            var checked = push
            PinRule.refuse(&checked, pinned: found.pinned, owner: account, suite: suite)
            do {
                switch try PushStep.run(
                    checked,
                    suite: suite,
                    held: pushHeld,
                    counters: output.counters,
                    recorded: recorded,
                    quota: pushed.quota,
                    serverTime: pushed.serverTime
                ) {
                case .replayed(let response):
                    output.results.append(.success(response))
                case .applied(let step):
                    let json = String(decoding: try WireJSON.encode(step.response), as: UTF8.self)
                    for entry in step.writes {
                        let key = entry.key.exact
                        if output.entries[key] == nil { output.order.append(key) }
                        output.entries[key] = entry
                        held[key] = entry
                    }
                    versions += step.versions
                    output.counters = step.counters
                    output.advanced = output.advanced || step.advanced
                    output.batchDevices.append(String(request.deviceID))
                    output.batchIDs.append(request.batchID)
                    output.batchDigests.append(Hex.string(push.digest))
                    output.batchResponses.append(json)
                    applied[batchKey] = (push.digest, step.response)
                    output.results.append(.success(step.response))
                }
            } catch {
                output.results.append(.failure(error))
            }
        }
        // The history rule of one push, over the group's versions: each key's last `historyDepth`.
        let merged = PushStep.Applied(
            response: PushResponse(headRev: output.counters.head, results: [], serverTime: ""),
            writes: [],
            replaced: [:],
            versions: versions,
            counters: output.counters
        )
        output.versions = merged.historyVersions(depth: group[0].quota.historyDepth)
        return output
    }

    /// `GroupWriteStatement`; false if the suite moved since `expected` was read.
    private func write(_ output: Output, expected: PushStep.Counters, _ connection: PostgresConnection) async throws -> Bool {
        let notice = String(
            decoding: try JSONEncoder().encode(ChangeNotice(account: account, suite: suite, head: output.counters.head)),
            as: UTF8.self
        )
        let rows = try await connection.rows(
            of: GroupWriteStatement(
                account: account,
                suite: suite,
                counters: output.counters,
                expected: expected,
                entries: EntryColumns(output.order.map { output.entries[$0]! }),
                history: EntryColumns(output.versions),
                depth: group[0].quota.historyDepth,
                batchDevices: output.batchDevices,
                batchIDs: output.batchIDs,
                batchDigests: output.batchDigests,
                batchResponses: output.batchResponses,
                notice: notice,
                notify: output.advanced,
                tokenIDs: Array(Set(group.compactMap(\.push.authority?.tokenID))),
                ownerIncarnation: group.lazy.compactMap(\.push.authority?.ownerIncarnation).first ?? "",
                memberAccounts: memberAccounts
            ),
            planningEach: plansEachStatement,
            logger: logger
        )
        for try await (guarded, _) in rows { return guarded > 0 }
        return false
    }
}
