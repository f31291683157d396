public import AsyncHTTPClient
public import Foundation
import GroupDefaults
public import GroupDefaultsWire
import NIOCore
import NIOHTTP1
import NIOSSL
import Synchronization

/// The server's `/v1` API for one suite, over AsyncHTTPClient: typed requests and answers, every
/// failure a `SyncError`.
public struct SyncClient: Sendable {
    /// The server's base URL (`https://sync.example.com`); `/v1/…` is appended.
    public let server: URL
    /// The suite's name on the server (namespaced by the token's account, or by `owner`'s).
    public let suite: String
    /// For a suite another account shares with this token's: that account, the suite's owner
    /// (sent as the `owner` query parameter of the suite's requests); nil for the account's own.
    public var owner: String?
    /// Called before each request: the bearer token, read afresh so that a new token takes effect.
    public let token: @Sendable () throws -> String
    let http: HTTPClient
    /// The HTTP client event streams (`events`) are opened on; nil: `http`. A client of their own
    /// (from `makeHTTPClient(caFile:connectTimeout:)`, with the same arguments as `http`) opens each
    /// stream on a new connection, which the server holds with no task: about half the server's
    /// memory per listening device of a stream that follows other requests on a kept-alive
    /// connection. The caller owns and shuts it down, as `http`.
    public var streamHTTP: HTTPClient?
    /// How long a request may take to get its answer's head (long-polls add their wait).
    public var timeout: Duration = .seconds(30)
    /// The connect timeout the HTTP client was made with (`makeHTTPClient(caFile:connectTimeout:)`),
    /// named in the error when no connection opens in time.
    public var connectTimeout: Duration = SyncClient.defaultConnectTimeout
    /// How long a connection may take to open unless told otherwise: 5 seconds.
    public static let defaultConnectTimeout: Duration = .seconds(5)
    /// How this client repeats a request the server refused for a while (429, 503): see
    /// `RetryPolicy`.
    public var retryPolicy = RetryPolicy()
    /// The device this client speaks for (its suite's origin), sent as the `Device-ID` header of
    /// every request so that the server can list the devices that pull as well as push; nil sends
    /// none (`SyncEngine` fills it in).
    public var deviceID: UInt64?
    /// The server's clock as its answers' `Date` headers give it (shared by copies of this client).
    let serverClock = ServerClock()
    /// The incarnation of the server's storage as its latest answer named it (`Server-Incarnation`;
    /// shared by copies of this client).
    let serverIncarnation = ServerIncarnation()
    /// The incarnation of the account that owns the suite: the one the suite remembers, sent with
    /// every request, and the one the latest answer named (`Account-Incarnation`; shared by copies
    /// of this client).
    let accountIncarnation = AccountIncarnation()

    /// A client on `http` (the caller owns and shuts it down; see `makeHTTPClient(caFile:)`).
    public init(server: URL, suite: String, http: HTTPClient, token: @escaping @Sendable () throws -> String) {
        self.server = server
        self.suite = suite
        self.http = http
        self.token = token
    }

    /// An HTTP client that verifies certificates against the system's authorities and, with
    /// `caFile`, also a private one (PEM). A connection that is refused, or does not open within
    /// `connectTimeout` (TLS handshake included), fails the request at once: the sync engine
    /// retries with its own backoff, and a one-shot step reports it.
    public static func makeHTTPClient(caFile: String? = nil, connectTimeout: Duration = defaultConnectTimeout) throws -> HTTPClient {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let caFile {
            do {
                let certificates = try NIOSSLCertificate.fromPEMFile(caFile)
                tls.additionalTrustRoots = [.certificates(certificates)]
            } catch {
                throw SyncError(.local, "cannot read the certificate authority file \(caFile): \(error)")
            }
        }
        var configuration = HTTPClient.Configuration(tlsConfiguration: tls)
        let milliseconds = connectTimeout.components.seconds * 1000 + connectTimeout.components.attoseconds / 1_000_000_000_000_000
        configuration.timeout = .init(connect: .milliseconds(max(1, milliseconds)))
        configuration.connectionPool = .init(idleTimeout: .seconds(90))
        configuration.connectionPool.retryConnectionEstablishment = false
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    // MARK: Endpoints

    /// `POST push`: sends a batch as the exact bytes of a `PushRequest`'s JSON, so that a retry
    /// after a crash can send the stored body again byte for byte.
    ///
    /// - Returns: Per op, whether it was applied or superseded by a later write the server already
    ///   held, with the entry the server holds for the key now; and the suite's head revision.
    /// - Throws: `SyncError`, from the server's error answer (a refused key, quota or batch size
    ///   names the key or limit) or from the network.
    public func push(body: [UInt8]) async throws(SyncError) -> PushResponse {
        // Sent again after a 503 too: the same batch id, so the server applies it once.
        try await send(.POST, path: "push", query: [], body: body, repeatable: true, as: PushResponse.self)
    }

    /// `changes?since=&limit=&wait=`: a long-poll when `wait` is given.
    public func changes(since: UInt64, limit: Int? = nil, wait: Int? = nil) async throws(SyncError) -> ChangesPage {
        var query = [URLQueryItem(name: "since", value: String(since))]
        if let limit { query.append(URLQueryItem(name: "limit", value: String(limit))) }
        if let wait { query.append(URLQueryItem(name: "wait", value: String(wait))) }
        return try await send(.GET, path: "changes", query: query, extraTime: .seconds(wait ?? 0), as: ChangesPage.self)
    }

    /// `GET snapshot`: one page of every entry the server holds for the suite, unexpired tombstones
    /// included, in key order.
    ///
    /// - Parameters:
    ///   - after: The previous page's `next`; nil for the first page.
    ///   - limit: Entries per page; nil for the server's default.
    /// - Returns: The page, with the head revision it was read at and the key to continue after
    ///   (nil on the last page).
    public func snapshot(after: String?, limit: Int? = nil) async throws(SyncError) -> SnapshotPage {
        var query: [URLQueryItem] = []
        if let after { query.append(URLQueryItem(name: "after", value: after)) }
        if let limit { query.append(URLQueryItem(name: "limit", value: String(limit))) }
        return try await send(.GET, path: "snapshot", query: query, as: SnapshotPage.self)
    }

    /// `GET keys/{key}/history`: the versions of `key` the server keeps, newest first.
    ///
    /// - Throws: `SyncError` with kind `.rejected` and code `not_found` when the server keeps no
    ///   version of the key (never written, purged, or history is off); otherwise as every request.
    public func history(key: String) async throws(SyncError) -> KeyHistory {
        try await send(.GET, path: "keys/\(Self.pathSegment(key))/history", query: [], as: KeyHistory.self)
    }

    /// `GET history`: one page of the versions the server keeps of every key of the suite, keys in
    /// key order, each whole, newest version first.
    ///
    /// - Parameters:
    ///   - after: The previous page's `next`; nil for the first page.
    ///   - limit: The most versions per page (whole keys, at least one); nil for the server's default.
    /// - Returns: The page, with the key to continue after (nil on the last page). A server that
    ///   keeps no history answers an empty page.
    public func history(after: String?, limit: Int? = nil) async throws(SyncError) -> SuiteHistoryPage {
        var query: [URLQueryItem] = []
        if let after { query.append(URLQueryItem(name: "after", value: after)) }
        if let limit { query.append(URLQueryItem(name: "limit", value: String(limit))) }
        return try await send(.GET, path: "history", query: query, as: SuiteHistoryPage.self)
    }

    /// `GET /v1/devices`: the devices of the token's account; the one this client speaks for (same
    /// token, `deviceID`) is marked `current`.
    public func devices() async throws(SyncError) -> DeviceList {
        try await send(.GET, url: "v1/devices", query: [], as: DeviceList.self)
    }

    /// `GET /v1/limits`, sent without the token: the key, value, suite and batch sizes the server
    /// accepts, and the clock skew it allows.
    public func limits() async throws(SyncError) -> SyncLimits {
        try await send(.GET, url: "v1/limits", query: [], authorized: false, as: SyncLimits.self)
    }

    // MARK: Key bags and pairings

    /// `GET key-bags`: each key epoch's key sealed to the suite's recovery key, by epoch.
    public func keyBags() async throws(SyncError) -> KeyBags {
        try await send(.GET, path: "key-bags", query: [], as: KeyBags.self)
    }

    /// `PUT key-bags/{epoch}`: stores an epoch's key sealed to the suite's recovery key, signed
    /// (`SuiteKeys.signedKeyBag`), which moves the suite to that epoch.
    public func putKeyBag(epoch: UInt32, bag: SignedKeyBag) async throws(SyncError) {
        _ = try await send(.PUT, path: "key-bags/\(epoch)", query: [], body: try Self.encode(bag), as: KeyBags.self)
    }

    /// `PUT key-bags`: stores the suite's anchor (`SuiteKeys.anchor`); the same one again changes nothing.
    public func anchorKeyBags(_ anchor: KeyAnchor) async throws(SyncError) -> KeyBags {
        try await send(.PUT, path: "key-bags", query: [], body: try Self.encode(anchor), as: KeyBags.self)
    }

    /// `POST /v1/pairings`: registers a pairing of this suite under `pairingID`.
    public func createPairing(pairingID: String) async throws(SyncError) -> PairingState {
        let body = try Self.encode(PairingRequest(suite: suite, pairingID: pairingID))
        return try await send(.POST, url: "v1/pairings", query: [], body: body, as: PairingState.self)
    }

    /// `POST /v1/pairings/{pairing_id}/claim`, sent without a token: the claiming device's token.
    public func claimPairing(pairingID: String, _ claim: PairingClaim) async throws(SyncError) -> PairingClaimed {
        try await send(
            .POST,
            url: "v1/pairings/\(pairingID)/claim",
            query: [],
            authorized: false,
            body: try Self.encode(claim),
            as: PairingClaimed.self
        )
    }

    /// `GET /v1/pairings/{pairing_id}`: where the pairing stands; with `authorized` false, sent
    /// without a token, as the claiming device reads it (the pairing id is its credential).
    public func pairing(pairingID: String, authorized: Bool = true) async throws(SyncError) -> PairingState {
        try await send(.GET, url: "v1/pairings/\(pairingID)", query: [], authorized: authorized, as: PairingState.self)
    }

    /// `DELETE /v1/pairings/{pairing_id}`: cancels a pairing this token made; the claiming
    /// device's token, if any, is revoked.
    public func cancelPairing(pairingID: String) async throws(SyncError) -> PairingState {
        try await send(.DELETE, url: "v1/pairings/\(pairingID)", query: [], as: PairingState.self)
    }

    /// `PUT /v1/pairings/{pairing_id}/keys`: the sealed keys for the device that claimed it.
    public func completePairing(pairingID: String, bundle: String) async throws(SyncError) -> PairingState {
        try await send(
            .PUT,
            url: "v1/pairings/\(pairingID)/keys",
            query: [],
            body: try Self.encode(PairingKeys(bundle: bundle)),
            as: PairingState.self
        )
    }

    // MARK: Sharing

    /// `POST invitations`: an invitation to this suite giving `role`, filed under `invitationID`
    /// (derived from its code), working for `expiresIn` seconds (nil: the server's 24 hours).
    public func createInvitation(
        invitationID: String,
        role: SuiteRole,
        expiresIn: UInt64?,
        offerMAC: String? = nil
    ) async throws(SyncError) -> InvitationInfo {
        let body = try Self.encode(InvitationRequest(invitationID: invitationID, role: role, expiresIn: expiresIn, offerMAC: offerMAC))
        return try await send(.POST, path: "invitations", query: [], body: body, as: InvitationInfo.self)
    }

    /// `GET invitations`: this suite's invitations, newest first (for its owner and admins).
    public func invitations() async throws(SyncError) -> InvitationList {
        try await send(.GET, path: "invitations", query: [], as: InvitationList.self)
    }

    /// `DELETE invitations/{id}`: revokes one of this suite's invitations by its public id.
    public func revokeInvitation(id: String) async throws(SyncError) -> InvitationInfo {
        try await send(.DELETE, path: "invitations/\(Self.pathSegment(id))", query: [], as: InvitationInfo.self)
    }

    /// `GET members`: who shares this suite.
    public func members() async throws(SyncError) -> MemberList {
        try await send(.GET, path: "members", query: [], as: MemberList.self)
    }

    /// `GET pins`: the keys pinned for the suite's members (key ids in an encrypted suite).
    public func pinnedKeys() async throws(SyncError) -> PinnedKeys {
        try await send(.GET, path: "pins", query: [], as: PinnedKeys.self)
    }

    /// `POST pins`: pins and unpins keys (the owner or an admin); the pinned keys after it.
    public func changePins(_ change: PinChange) async throws(SyncError) -> PinnedKeys {
        try await send(.POST, path: "pins", query: [], body: try Self.encode(change), as: PinnedKeys.self)
    }

    /// `DELETE members/{account}`: removes `account` from this suite (or, for the token's own
    /// account, leaves it).
    public func removeMember(_ account: String) async throws(SyncError) -> MemberRemoved {
        try await send(.DELETE, path: "members/\(Self.pathSegment(account))", query: [], as: MemberRemoved.self)
    }

    /// `GET /v1/invitations/{invitation_id}`: what an invitation offers, and where it stands.
    public func invitation(invitationID: String) async throws(SyncError) -> InvitationInfo {
        try await send(.GET, url: "v1/invitations/\(invitationID)", query: [], as: InvitationInfo.self)
    }

    /// `POST /v1/invitations/{invitation_id}/accept`: makes the token's account a member; `claim`
    /// is the joining device's member key for an end-to-end encrypted suite.
    public func acceptInvitation(invitationID: String, claim: InvitationClaim? = nil) async throws(SyncError) -> Membership {
        let body = try claim.map { claim throws(SyncError) in try Self.encode(claim) } ?? []
        return try await send(.POST, url: "v1/invitations/\(invitationID)/accept", query: [], body: body, as: Membership.self)
    }

    /// `PUT invitations/{id}/keys`: hands this encrypted suite's keys, sealed, to the device that
    /// accepted the invitation whose public id is `id`, with the member's admission.
    public func handOverKeys(invitation id: String, _ keys: InvitationKeys) async throws(SyncError) -> InvitationInfo {
        try await send(.PUT, path: "invitations/\(Self.pathSegment(id))/keys", query: [], body: try Self.encode(keys), as: InvitationInfo.self)
    }

    private static func encode(_ value: some Encodable) throws(SyncError) -> [UInt8] {
        do { return Array(try JSONEncoder().encode(value)) } catch { throw SyncError(.local, "cannot encode a request: \(error)") }
    }

    /// Opens `events` after `lastEventID` and calls `onEvents` with the events of each chunk that
    /// arrives (in order, at least one per call), until the stream ends (returns) or fails (throws).
    /// A stream silent for longer than `idleTimeout` (the server sends a heartbeat every 15 s) is
    /// taken as broken.
    public func events(
        after lastEventID: UInt64,
        idleTimeout: Duration = .seconds(45),
        onOpen: @Sendable () async -> Void = {},
        onEvents: @escaping @Sendable ([ServerSentEvent]) async throws -> Void
    ) async throws {
        var request = try makeRequest(.GET, url: "v1/suites/\(encodedSuite)/events", query: ownerQuery, authorized: true)
        request.headers.add(name: "Accept", value: "text/event-stream")
        request.headers.add(name: "Last-Event-ID", value: String(lastEventID))
        let response: HTTPClientResponse
        do {
            response = try await execute(request, extraTime: .zero, on: streamHTTP ?? http)
        } catch let error as SyncError { throw ofThisCopy(error) }
        guard response.status == .ok else { throw ofThisCopy(await Self.failure(response)) }
        await onOpen()
        let activity = ActivityClock()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                var parser = ServerSentEventParser()
                var chunks = response.body.makeAsyncIterator()
                while true {
                    let chunk: ByteBuffer?
                    do { chunk = try await chunks.next() } catch {
                        throw SyncError(.unavailable, "the event stream broke: \(failure.cause(of: error).words)")
                    }
                    guard let chunk else { return }
                    activity.touch()
                    let events = parser.feed(Array(chunk.readableBytesView))
                    // What `onEvents` throws is the caller's own, passed on as it is.
                    if !events.isEmpty { try await onEvents(events) }
                }
            }
            group.addTask {
                while true {
                    try await Task.sleep(for: idleTimeout / 3)
                    if activity.idle > idleTimeout { throw SyncError(.unavailable, "the event stream went silent") }
                }
            }
            _ = try await group.next()
            group.cancelAll()
        }
    }

    // MARK: Requests

    private var encodedSuite: String { Self.pathSegment(suite) }

    /// The `owner` query parameter of a shared suite's requests; none for the account's own.
    private var ownerQuery: [URLQueryItem] { owner.map { [URLQueryItem(name: OwnerParameter.name, value: $0)] } ?? [] }

    /// `text` percent-encoded as one path segment: '/' included, and a segment of dots only ('.',
    /// '..') written as `%2E`s, which no URL resolution takes for a step in the path.
    static func pathSegment(_ text: String) -> String {
        if !text.isEmpty, text.allSatisfy({ $0 == "." }) { return String(repeating: "%2E", count: text.count) }
        return text.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))) ?? text
    }

    private func send<Answer: Decodable>(
        _ method: HTTPMethod,
        path: String,
        query: [URLQueryItem],
        body: [UInt8]? = nil,
        extraTime: Duration = .zero,
        repeatable: Bool? = nil,
        as: Answer.Type
    ) async throws(SyncError) -> Answer {
        try await send(
            method,
            url: "v1/suites/\(encodedSuite)/\(path)",
            query: query + ownerQuery,
            body: body,
            extraTime: extraTime,
            repeatable: repeatable,
            as: Answer.self
        )
    }

    /// Sends the request and decodes its answer; a refusal for a while (429, and 503 for a
    /// `repeatable` request: by default a `GET`) is sent again as `retryPolicy` says.
    private func send<Answer: Decodable>(
        _ method: HTTPMethod,
        url: String,
        query: [URLQueryItem],
        authorized: Bool = true,
        body: [UInt8]? = nil,
        extraTime: Duration = .zero,
        repeatable: Bool? = nil,
        as: Answer.Type
    ) async throws(SyncError) -> Answer {
        let repeatable = repeatable ?? (method == .GET)
        var retries = retryPolicy.start()
        while true {
            do {
                return try await sendOnce(method, url: url, query: query, authorized: authorized, body: body, extraTime: extraTime, as: Answer.self)
            } catch {
                let refusal = error
                guard let wait = retries.wait(after: refusal, repeatable: repeatable) else { throw refusal.retried(by: retries) }
                do { try await Task.sleep(for: wait) } catch { throw refusal.retried(by: retries) }
            }
        }
    }

    private func sendOnce<Answer: Decodable>(
        _ method: HTTPMethod,
        url: String,
        query: [URLQueryItem],
        authorized: Bool,
        body: [UInt8]?,
        extraTime: Duration,
        as: Answer.Type
    ) async throws(SyncError) -> Answer {
        do {
            var request = try makeRequest(method, url: url, query: query, authorized: authorized)
            if let body {
                request.headers.add(name: "Content-Type", value: "application/json")
                request.body = .bytes(ByteBuffer(bytes: body))
            }
            let response = try await execute(request, extraTime: extraTime, on: http)
            guard response.status == .ok else { throw await Self.failure(response) }
            let bytes = try await response.body.collect(upTo: 64 << 20)
            do {
                // An entry's value too deep to decode is read as unavailable, that key alone.
                let json = OverDeepValues.replaced(in: Array(bytes.readableBytesView))
                return try JSONDecoder().decode(Answer.self, from: Data(json))
            } catch {
                throw SyncError(.protocolError, "the answer to \(method) /\(url) is not what the API describes: \(error)")
            }
        } catch let error as SyncError {
            throw ofThisCopy(error)
        } catch {
            throw SyncError(.unavailable, "\(method) /\(url) failed: \(failure.cause(of: error).words)")
        }
    }

    /// `error` as this suite's copy meets it: a member's copy of a suite whose owner's account was
    /// deleted never starts over in the new account of that name (its remedy is `keepCopy`).
    private func ofThisCopy(_ error: SyncError) -> SyncError {
        guard owner != nil, error.remedy == .startOver else { return error }
        var copy = error
        copy.remedy = .keepCopy
        return copy
    }

    private func makeRequest(_ method: HTTPMethod, url path: String, query: [URLQueryItem], authorized: Bool) throws -> HTTPClientRequest {
        // `path` is already percent-encoded (`pathSegment`): joined as text, not encoded again.
        var base = server.absoluteString
        while base.hasSuffix("/") { base.removeLast() }
        var components = URLComponents(string: base + "/" + path)
        if !query.isEmpty { components?.queryItems = query }
        guard let url = components?.url?.absoluteString else { throw SyncError(.local, "cannot make a URL from \(server) and \(path)") }
        var request = HTTPClientRequest(url: url)
        request.method = method
        if let deviceID { request.headers.add(name: DeviceHeader.name, value: String(deviceID)) }
        if authorized {
            let token: String
            do { token = try self.token() } catch let error as SyncError { throw error } catch {
                throw SyncError(.authenticationNeeded, "cannot read the token: \(error)")
            }
            request.headers.add(name: "Authorization", value: "Bearer \(token)")
            if let known = accountIncarnation.known { request.headers.add(name: AccountIncarnationHeader.name, value: known) }
        }
        return request
    }

    private func execute(_ request: HTTPClientRequest, extraTime: Duration, on http: HTTPClient) async throws -> HTTPClientResponse {
        // A stopped command (its wait cancelled by a Ctrl-C) sends nothing more.
        guard !Task.isCancelled else { throw SyncError(.unavailable, "the request was not sent: the command is stopping") }
        let response: HTTPClientResponse
        do {
            let seconds = (timeout + extraTime).components.seconds
            response = try await http.execute(request, timeout: .seconds(seconds))
        } catch {
            let cause = failure.cause(of: error)
            var unreached = SyncError(.unavailable, "cannot reach \(server.absoluteString): \(cause.words)")
            unreached.isUnreached = cause.unreached
            unreached.isLasting = cause.lasting
            throw unreached
        }
        // An answer about another account of the same name is refused before anything in it is
        // read, the server's incarnation included (it is not "restored from a backup").
        if let named = response.headers.first(name: AccountIncarnationHeader.name) { try accountIncarnation.note(named) }
        if let date = response.headers.first(name: "Date") { serverClock.note(date) }
        if let incarnation = response.headers.first(name: IncarnationHeader.name) { serverIncarnation.note(incarnation) }
        return response
    }

    /// An error answer as a `SyncError`, from its status, `Retry-After` and JSON body.
    private static func failure(_ response: HTTPClientResponse) async -> SyncError {
        let body = try? await response.body.collect(upTo: 1 << 20)
        let decoded = body.flatMap { try? JSONDecoder().decode(SyncErrorBody.self, from: Data($0.readableBytesView)) }
        let retryAfter = response.headers.first(name: "Retry-After").flatMap {
            RetryAfter.wait($0, answeredAt: response.headers.first(name: "Date"))
        }
        return SyncError.answer(status: Int(response.status.code), body: decoded, retryAfter: retryAfter)
    }

    /// Reads the errors of requests that got no answer.
    private var failure: NetworkFailure { NetworkFailure(connectTimeout: connectTimeout, answerTimeout: timeout) }
}

/// The incarnation of the server's storage, from the `Server-Incarnation` header of its latest
/// answer; nil before an answer named one (a server from before incarnations names none).
final class ServerIncarnation: Sendable {
    private let latest = Mutex<String?>(nil)

    func note(_ incarnation: String) { latest.withLock { $0 = incarnation } }

    var current: String? { latest.withLock { $0 } }
}

/// The incarnation of the account that owns the suite (`AccountIncarnationHeader`): the one the
/// suite remembers (`SyncEngine` sets it; nil before the suite learnt one) and the one the latest
/// answer named. An answer that names another than the remembered one is about a new account of
/// the same name: refused (`SyncError.accountDeleted`).
final class AccountIncarnation: Sendable {
    private let state = Mutex<(known: String?, latest: String?)>((nil, nil))

    /// Sets the remembered incarnation (nil: none yet, the next answer's is trusted).
    func know(_ incarnation: String?) { state.withLock { $0 = (incarnation, nil) } }

    /// The remembered incarnation, sent with every request.
    var known: String? { state.withLock { $0.known } }

    /// The latest answer's, while none is remembered.
    var latest: String? { state.withLock { $0.latest } }

    /// Notes an answer's incarnation; throws when it is not the remembered one.
    func note(_ incarnation: String) throws(SyncError) {
        let known = state.withLock { state in
            if state.known == nil { state.latest = incarnation }
            return state.known
        }
        guard let known, known != incarnation else { return }
        throw SyncError.accountDeleted(
            "the account this suite synced with was deleted on the server, and its name is now a new account's: "
                + "sync is paused, and this device keeps its data and uploads none of it to the new account"
        )
    }
}

/// When a stream last received something.
private final class ActivityClock: Sendable {
    private let last = Mutex(ContinuousClock.now)

    func touch() { last.withLock { $0 = .now } }
    var idle: Duration { ContinuousClock.now - last.withLock { $0 } }
}

/// The server's clock, from the `Date` header of its latest answer (whole seconds), carried forward
/// by this machine's monotonic clock: what tells a device whose own clock is behind from entries
/// stamped by a wrong clock elsewhere.
final class ServerClock: Sendable {
    private let reading = Mutex<(milliseconds: UInt64, at: ContinuousClock.Instant)?>(nil)

    /// Notes an HTTP date (`Thu, 26 Nov 2026 13:05:52 GMT`); one that does not parse is ignored.
    func note(_ httpDate: String) {
        guard let milliseconds = Self.parse(httpDate) else { return }
        reading.withLock { $0 = (milliseconds, .now) }
    }

    /// The server's clock now, in milliseconds since 1970, as far as its answers tell; nil before
    /// the first. Up to a second behind (the header's resolution).
    var milliseconds: UInt64? {
        reading.withLock { reading in
            reading.map { $0.milliseconds + UInt64(max(0, (ContinuousClock.now - $0.at) / .milliseconds(1))) }
        }
    }

    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// RFC 9110's IMF-fixdate, through typed JSON's ISO 8601 reader.
    static func parse(_ text: String) -> UInt64? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[5] == "GMT", let month = months.firstIndex(of: String(parts[2])),
            parts[1].count == 2, parts[3].count == 4, parts[4].count == 8
        else { return nil }
        let iso = "\(parts[3])-\(month < 9 ? "0" : "")\(month + 1)-\(parts[1])T\(parts[4]).000Z"
        guard let date = TypedJSONDate.parse(iso), date.timeIntervalSince1970 > 0 else { return nil }
        return UInt64(date.timeIntervalSince1970 * 1000)
    }
}
