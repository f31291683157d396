import Foundation
public import GroupDefaults
import GroupDefaultsWire
public import Logging

/// Mirrors one suite to a `groupdefaults-server`: offline first, last writer wins by HLC, no echo,
/// nothing lost (ARCHITECTURE.md tells how a change travels).
///
/// Local changes are found through the suite's pending marks, written by whichever process made
/// the change in the change's own transaction; pulled entries are applied with `applyRemote`
/// (their own stamps, never marked pending, the cursor saved with them). The batch being pushed
/// is stored before it is sent, so that a retry after a crash sends the same body under the same
/// id, and an acknowledgement clears a mark only if the key did not change meanwhile.
///
/// ```swift
/// let engine = try SyncEngine(configured: defaults, http: http)   // the suite's own settings
/// let report = try await engine.syncOnce()
/// await engine.run()                                            // until the task is cancelled
/// ```
public actor SyncEngine {
    /// How the engine paces itself.
    public struct Options: Sendable {
        /// How remote changes arrive in `run()`.
        public enum Transport: String, Sendable {
            /// Server-Sent Events (`/events`): one open request, woken at once.
            case eventStream = "events"
            /// Long-polls of `/changes?wait=`, for networks that break streams.
            case longPoll = "long-poll"
        }

        /// How remote changes arrive in `run()`: the event stream (the default) or long-polls.
        public var transport: Transport = .eventStream
        /// How long `run()` waits after a local change before pushing, to coalesce a burst.
        public var debounce: Duration = .milliseconds(2)
        /// Entries per page of `changes` and `snapshot`.
        public var pageSize = 1000
        /// The `wait` of a long-poll, in seconds.
        public var longPollWait = 30
        /// The ceiling of the first wait between retries of transient failures. Each wait is random
        /// between half its ceiling and the ceiling, which doubles after each retry.
        public var initialBackoff: Duration = .milliseconds(200)
        /// The highest ceiling of a wait between retries; a server's longer `Retry-After` is cut to it.
        public var maximumBackoff: Duration = .seconds(30)
        /// How many times a one-shot step (`syncOnce`, `pull`, `push`) tries through transient
        /// failures before it reports one.
        public var oneShotAttempts = 4
        /// How often a paused engine looks (locally) for a new token.
        public var tokenCheckInterval: Duration = .seconds(1)
        /// Called with the progress of long steps (snapshot reads, large pushes).
        public var progress: (@Sendable (SyncProgress) -> Void)?
        /// How long a request may wait for its answer's head, for an engine made with
        /// `init(configured:http:options:)` (long-polls add their wait).
        public var answerTimeout: Duration = .seconds(30)
        /// The connect timeout the HTTP client was made with (`SyncClient.makeHTTPClient(caFile:connectTimeout:)`),
        /// for an engine made with `init(configured:http:options:)`: named when it expires.
        public var connectTimeout: Duration = SyncClient.defaultConnectTimeout

        /// Options with every setting at its default.
        public init() {}
    }

    /// The suite this engine mirrors.
    public nonisolated let defaults: SharedDefaults
    /// The server API the engine talks to, for this suite.
    public nonisolated let client: SyncClient
    /// For a suite another account shares with this one: whose it is and this account's role (a
    /// `read` member's engine never pushes); nil for the account's own suite.
    public nonisolated let shared: Membership?
    let options: Options
    let logger: Logger
    /// The status, its watchers and the suite's sync note.
    let board: StatusBoard
    /// Pushes run one at a time (one in-flight batch), and so do pulls (the cursor only advances).
    let turns = StepTurns()
    /// The keys an encrypted suite's entries are sealed and opened with (none for a plain suite).
    var keyring: Keyring
    /// This account's role in the suite another account shares with it, as the server last said:
    /// `shared`'s, until a push is refused for a read member's or a read member's server says
    /// otherwise (`adoptRole`).
    var role: SuiteRole?
    /// What goes in the next batch, what is set aside, what a push's answer settles: the rules of
    /// pushing, without I/O.
    var planner = PushPlanner()
    /// The server's limits, asked at this engine's first push.
    var limits: SyncLimits?
    /// Whether a join marked keys pending that no push has sent yet (`run` pushes them at once).
    var joinedSincePush = false

    /// The status, as of the last step.
    public nonisolated var status: SyncStatus { board.current }

    /// Whether the suite is end-to-end encrypted on this device (it has a key file): then a member
    /// the server lists without an admission holds none of its keys yet (`members` says so).
    public var isEncrypted: Bool { keyring.keys != nil }

    /// An engine for `defaults` through `client`, whatever the suite's stored settings say (see
    /// `init(configured:http:options:)` for a suite set up with `groupdefaults-sync configure`).
    ///
    /// The suite must be marked synced (`SyncSettings.store(in:)`) for the changes its processes
    /// make to be recorded as pending.
    ///
    /// - Parameters:
    ///   - defaults: The suite to mirror.
    ///   - client: The server and token for the suite.
    ///   - options: Pacing: transport, debounce, page size, backoff.
    ///   - logger: Where the engine logs; nil for one labelled "GroupDefaultsSync".
    ///   - keys: The suite's end-to-end encryption keys, for an encrypted suite; nil for a plain one.
    ///   - shared: For a suite another account shares with this one, whose it is and this
    ///     account's role (the client must name the same owner and suite); nil for the account's own.
    ///
    /// A client that names no device (`SyncClient.deviceID`) is given the suite's origin, so that
    /// the server lists this device as one.
    public init(
        defaults: SharedDefaults,
        client: SyncClient,
        options: Options = Options(),
        logger: Logger? = nil,
        keys: SuiteKeys? = nil,
        shared: Membership? = nil
    ) {
        self.init(defaults: defaults, client: client, options: options, logger: logger, keys: keys, keyFile: nil, shared: shared)
    }

    /// An engine whose keys came from `keyFile`, read again when the suite is rotated.
    init(
        defaults: SharedDefaults,
        client: SyncClient,
        options: Options,
        logger: Logger?,
        keys: SuiteKeys?,
        keyFile: String?,
        shared: Membership?
    ) {
        self.defaults = defaults
        self.shared = shared
        self.role = shared?.role
        var client = client
        if client.deviceID == nil { client.deviceID = defaults.origin }
        // The owner account's incarnation the suite remembers, sent with every request and
        // compared with every answer's (`AccountIncarnation`).
        client.accountIncarnation.reload(from: defaults)
        self.client = client
        self.options = options
        let logger = logger ?? Logger(label: "GroupDefaultsSync")
        self.logger = logger
        self.board = StatusBoard(defaults: defaults, logger: logger)
        self.keyring = Keyring(keys: keys, file: keyFile, suite: client.suite, logger: logger)
    }

    /// The status each time it changes, starting with the current one.
    public func statusUpdates() -> AsyncStream<SyncStatus> { board.updates() }

    // MARK: One-shot steps

    /// Pulls, pushes what is pending, and pulls again: afterwards the suite and the server agree
    /// unless the report says otherwise (`isInAgreement`).
    ///
    /// - Throws: `SyncError`: `authenticationNeeded` (nothing pending is lost), `unavailable` after
    ///   `oneShotAttempts` tries (at once when the server cannot be reached or does not answer in
    ///   time: `SyncError.isUnreached`), `local`, `protocolError`. Refused keys are in the report, not thrown.
    @discardableResult
    public func syncOnce() async throws(SyncError) -> SyncReport {
        var report = try await pull()
        report.add(try await push())
        report.add(try await pull())
        return board.finished(report, rejected: planner.rejected)
    }

    /// Pulls what the server has beyond the cursor (the snapshot for a device that never synced,
    /// or after the cursor expired or the suite was reset) and applies it.
    @discardableResult
    public func pull() async throws(SyncError) -> SyncReport {
        let report = try await retryingTransientFailures { () async throws(SyncError) in try await self.pullOnce() }
        return board.finished(report, rejected: planner.rejected)
    }

    /// Pushes every pending change (in batches), then clears what the server acknowledged.
    @discardableResult
    public func push() async throws(SyncError) -> SyncReport {
        let report = try await retryingTransientFailures { () async throws(SyncError) in try await self.pushPending() }
        return board.finished(report, rejected: planner.rejected)
    }

    private func retryingTransientFailures(_ step: () async throws(SyncError) -> SyncReport) async throws(SyncError) -> SyncReport {
        var backoff = Backoff(initial: options.initialBackoff, maximum: options.maximumBackoff)
        var attempt = 1
        while true {
            do {
                let report = try await step()
                succeeded()
                return report
            } catch {
                board.failed(error)
                guard error.isTransient, !error.isUnreached, !error.isRetriedByClient, attempt < options.oneShotAttempts else { throw error }
                attempt += 1
                do { try await Task.sleep(for: backoff.next(retryAfter: error.retryAfter)) } catch { throw SyncError.cancelled }
            }
        }
    }

    /// A step succeeded: the status says so, and the suite remembers the account's incarnation if
    /// it knew none (`AccountIncarnation.rememberLatest`).
    func succeeded() {
        client.accountIncarnation.rememberLatest(in: defaults, logger: logger)
        board.succeeded()
    }

    /// Keeps the suite and the server in agreement until the task is cancelled: local changes (from
    /// any process, through the change feed) are pushed after `debounce`, coalesced per key; remote
    /// changes arrive through the event stream (or long-polls) and are applied as they come. With
    /// nothing changing, the one open stream is the only request. Transient failures are retried
    /// with backoff; a refused token pauses both directions, sending nothing, until the token
    /// changes.
    public func run() async { await SyncRunner(self).run() }

    // MARK: Keys

    /// Takes what the suite's key bags tell (a suite shared between accounts): how a rotation this
    /// device began ended (`Keyring.settleRotation`), then the epochs after this device's newest
    /// that they hand it (rotated since: `Keyring.adopt`), writing them to the key file first; true
    /// if the keys changed. When there were none, no epoch after this device's newest is
    /// to be had from them now, whichever the entries need (two `rotate-key`s on another device:
    /// epoch 3 when this one has 1), so that the step reports it rather than trying again (the
    /// next step looks again).
    func adoptSharedEpochs() async throws(SyncError) -> Bool {
        let needed = keyring.needsSharedEpochs
        keyring.needsSharedEpochs = false
        guard keyring.file != nil, keyring.keys?.sharing != nil else { return false }
        if keyring.reload() { return true }
        let before = keyring.keys?.currentEpoch
        let bags = try await client.keyBags()
        // Another step took a newer epoch meanwhile: what these bags hand is in use already.
        if keyring.keys?.currentEpoch != before { return true }
        // A rotation begun here that another device's won: its key goes before the bags' is taken.
        let settled = try keyring.settleRotation(with: bags)
        return try keyring.adopt(bags, needed: needed) || settled
    }

    /// Takes `keys` as the keys in use (those a rotation made here has just written to the key
    /// file; then true), or with none reads the key file again (`Keyring.reload`: true if it has a
    /// newer epoch than the keys in use).
    @discardableResult
    func reloadKeys(taking keys: SuiteKeys? = nil) -> Bool {
        guard let keys else { return keyring.reload() }
        keyring.use(keys)
        return true
    }
}
