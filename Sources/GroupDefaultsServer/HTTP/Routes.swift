import Foundation
import GroupDefaultsWire
package import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle

/// The `/v1` API: handlers decode, check, call storage, encode. Each route is in the group that
/// says what it needs first (`APIGroups`: a token, or none). `devices` records the devices that
/// use it (the application writes what it still holds before it closes storage).
package func buildRouter(
    storage: any ServerStorage,
    configuration: ServerConfiguration,
    devices: DeviceTracker? = nil
) -> Router<ServerRequestContext> {
    _ = ServerMetrics.openEventStreams  // shown from the start, at 0
    _ = ServerMetrics.heldEventStreams
    let router = Router(context: ServerRequestContext.self)
    router.add(middleware: MetricsMiddleware())  // outermost: it sees every answer, errors included
    router.add(middleware: LogRequestsMiddleware(.debug))
    router.add(middleware: IncarnationMiddleware(storage: storage))  // outside the errors: they carry it too
    router.add(middleware: ErrorMiddleware())
    // One token cache and one set of rate-limit buckets for every group.
    let groups = APIGroups(
        authenticator: Authenticator(storage: storage),
        limiter: RateLimiter(configuration.rateLimit),
        incarnations: AccountIncarnations(storage: storage)
    )
    let activity = ConsoleActivity()  // what the console's charts show, fed by pushes and event streams
    let routes = SyncRoutes(
        storage: storage,
        configuration: configuration,
        authenticator: groups.authenticator,
        activity: activity,
        tracker: devices ?? DeviceTracker(storage: storage)
    )
    let pairings = PairingRoutes(storage: storage)

    let open = groups.open(router)
    open.get("health") { _, _ in try JSONBody.response(["status": "ok"]) }
    open.get("limits") { _, _ in try JSONBody.response(PublishedLimits(limits: configuration.limits)) }

    let token = groups.token(router)
    token.get("suites") { request, context in try await routes.listSuites(request, context) }
    token.post("suites/{suite}/push") { request, context in try await routes.push(request, context) }
    token.get("suites/{suite}/changes") { request, context in try await routes.changes(request, context) }
    token.get("suites/{suite}/snapshot") { request, context in try await routes.snapshot(request, context) }
    token.get("suites/{suite}/events") { request, context in try await routes.events(request, context) }
    token.get("suites/{suite}/keys/{key}/history") { request, context in try await routes.history(request, context) }
    token.get("suites/{suite}/history") { request, context in try await routes.suiteHistory(request, context) }
    token.get("devices") { request, context in try await routes.devices(request, context) }
    token.get("suites/{suite}/key-bags") { request, context in try await routes.keyBags(request, context) }
    token.put("suites/{suite}/key-bags") { request, context in try await routes.anchorKeyBags(request, context) }
    token.put("suites/{suite}/key-bags/{epoch}") { request, context in try await routes.putKeyBag(request, context) }
    let sharing = SharingRoutes(storage: storage)
    token.post("suites/{suite}/invitations") { request, context in try await sharing.invite(request, context) }
    token.get("suites/{suite}/invitations") { request, context in try await sharing.invitations(request, context) }
    token.delete("suites/{suite}/invitations/{invitation}") { request, context in try await sharing.revoke(request, context) }
    token.put("suites/{suite}/invitations/{invitation}/keys") { request, context in try await sharing.handOverKeys(request, context) }
    token.get("suites/{suite}/members") { request, context in try await sharing.members(request, context) }
    token.delete("suites/{suite}/members/{account}") { request, context in try await sharing.remove(request, context) }
    token.get("suites/{suite}/pins") { request, context in try await sharing.pins(request, context) }
    token.post("suites/{suite}/pins") { request, context in try await sharing.changePins(request, context) }
    token.get("invitations/{invitation}") { request, context in try await sharing.describe(request, context) }
    token.post("invitations/{invitation}/accept") { request, context in try await sharing.accept(request, context) }
    token.post("pairings") { request, context in try await pairings.create(request, context) }
    token.put("pairings/{pairing}/keys") { request, context in try await pairings.complete(request, context) }
    token.delete("pairings/{pairing}") { request, context in try await pairings.cancel(request, context) }
    groups.pairingState(router).get("pairings/{pairing}") { request, context in try await pairings.state(request, context) }
    groups.pairingClaim(router).post("pairings/{pairing}/claim") { request, context in try await pairings.claim(request, context) }

    router.get("/metrics") { request, _ in
        if let expected = configuration.metricsToken, !Tokens.sameBearer(request.headers[.authorization], expected) {
            throw APIError.unauthorized("/metrics needs the bearer token of --metrics-token-file")
        }
        return Response(
            status: .ok,
            headers: [.contentType: "text/plain; version=0.0.4"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: ServerMetrics.text()))
        )
    }
    if configuration.console.enabled {
        ConsoleRoutes(storage: storage, configuration: configuration, activity: activity).register(on: router)
    }
    router.add(middleware: groups.unknownRoutes)  // last: only for requests no route matched
    return router
}

struct SyncRoutes: Sendable {
    /// What the token routes read and write: suites, the tokens (for a device list's), devices, key
    /// bags, and who shares a suite.
    typealias Storage = SyncStore & TokenStore & DeviceStore & KeyBagStore & SharingStore

    let storage: any Storage
    let configuration: ServerConfiguration
    let tracker: DeviceTracker
    /// The event streams and waiting long-polls each token holds open.
    let streams: StreamSlots
    let authenticator: Authenticator
    let activity: ConsoleActivity

    init(storage: any Storage, configuration: ServerConfiguration, authenticator: Authenticator, activity: ConsoleActivity, tracker: DeviceTracker) {
        self.storage = storage
        self.activity = activity
        self.authenticator = authenticator
        self.configuration = configuration
        self.tracker = tracker
        self.streams = StreamSlots(limit: configuration.limits.maxStreamsPerToken)
    }

    /// The token `TokenAuthentication` checked first (401), then the suite (`SuiteAccess.check`).
    private func authorized(_ request: Request, _ context: TokenRequestContext, need: SuiteAccess.Need) async throws -> SuiteAccess {
        try await SuiteAccess.check(request, context, need: need, sharing: storage)
    }

    /// Notes the device of a pull (`changes`, `snapshot`, `events`).
    private func pulled(_ context: TokenRequestContext, _ access: SuiteAccess) async {
        await tracker.seen(token: access.token, deviceID: context.deviceID, suite: access.deviceSuite, push: false)
    }

    /// `GET /v1/suites`: the account's written suites the token covers, then the suites other
    /// accounts share with it that the token covers (written or not).
    func listSuites(_ request: Request, _ context: TokenRequestContext) async throws -> Response {
        let token = context.token
        let list = try await storage.suites(account: token.account)
        var visible = list.suites.filter { token.covers($0.name) }
        var owners: [ExactName: [ExactName: SuiteList.Suite]] = [:]
        for membership in try await storage.memberships(account: token.account) where token.covers(membership.suite) {
            let owner = membership.owner.exact
            if owners[owner] == nil {
                owners[owner] = Dictionary(
                    try await storage.suites(account: membership.owner).suites.map { ($0.name.exact, $0) },
                    uniquingKeysWith: { first, _ in first }
                )
            }
            let held = owners[owner]?[membership.suite.exact]
            visible.append(
                SuiteList.Suite(
                    name: membership.suite,
                    headRev: held?.headRev ?? 0,
                    keys: held?.keys ?? 0,
                    owner: membership.owner,
                    role: membership.role
                )
            )
        }
        return try JSONBody.response(SuiteList(suites: visible))
    }

    func push(_ request: Request, _ context: TokenRequestContext) async throws -> Response {
        let access = try await authorized(request, context, need: .write)
        let (token, suite) = (access.token, access.deviceSuite)
        let json = try await JSONBody.read(request, limit: configuration.limits.maxBodyBytes)
        let body = try JSONBody.decode(PushRequest.self, from: json)
        var push = try PushValidation.prepare(body, json: json, limits: configuration.limits)
        if access.isShared { push.account = token.account }
        push.authority = PushAuthority(tokenID: token.id, ownerIncarnation: context.accountIncarnation?.checkedIncarnation)
        // The device is the body's `device_id`; its last push is one the server answered.
        let response: PushResponse
        do {
            response = try await storage.push(
                account: access.owner,
                suite: access.suite,
                push: push,
                quota: configuration.quota,
                serverTime: TypedJSONDate.format(milliseconds: HLC.wallClockMilliseconds())
            )
        } catch {
            await tracker.seen(token: token, deviceID: body.deviceID, suite: suite, push: false)
            throw error
        }
        await tracker.seen(token: token, deviceID: body.deviceID, suite: suite, push: true)
        ServerMetrics.pushed(response.results)
        activity.pushed()
        return JSONBody.response(json: try WireJSON.encode(response))
    }

    func changes(_ request: Request, _ context: TokenRequestContext) async throws -> Response {
        let access = try await authorized(request, context, need: .read)
        let (owner, suite) = (access.owner, access.suite)
        let query = request.uri.queryParameters
        let since = try Query.unsigned(query, "since") ?? 0
        let limit = try pageSize(query)
        let waitSeconds = try Query.unsigned(query, "wait") ?? 0
        await pulled(context, access)
        var page = try await storage.changes(account: owner, suite: suite, since: since, limit: limit)
        if page.entries.isEmpty, waitSeconds > 0 {
            let slot = try streams.take(for: access.token)
            defer { withExtendedLifetime(slot) {} }
            let wait = min(Duration.seconds(Int64(clamping: waitSeconds)), configuration.maxWait)
            let storage = self.storage
            let head = page.lastRev
            _ = await storage.waitForChangeUntilShutdown(account: owner, suite: suite, after: head, timeout: wait)
            // A member removed meanwhile gets nothing more.
            guard await access.isStillAllowed(storage) else {
                throw APIError(.notAMember, "\(owner)'s suite '\(suite)' is no longer shared with this account")
            }
            page = try await storage.changes(account: owner, suite: suite, since: since, limit: limit)
        }
        return JSONBody.response(json: page.json(valueLimit: configuration.limits.maxValueBytes))
    }

    func events(_ request: Request, _ context: TokenRequestContext) async throws -> Response {
        let access = try await authorized(request, context, need: .read)
        let slot = try streams.take(for: access.token)
        await pulled(context, access)
        let tracker = self.tracker
        let deviceID = context.deviceID
        // An open stream keeps its device seen: at each change and heartbeat.
        return try await EventStream(storage: storage, authenticator: authenticator, configuration: configuration, activity: activity) {
            await tracker.seen(token: access.token, deviceID: deviceID, suite: access.deviceSuite, push: false)
        }.response(access: access, request: request, slot: slot, parking: context.streamParking)
    }

    func snapshot(_ request: Request, _ context: TokenRequestContext) async throws -> Response {
        let access = try await authorized(request, context, need: .read)
        let query = request.uri.queryParameters
        let after = query["after"].map(String.init)
        let limit = try pageSize(query)
        await pulled(context, access)
        let page = try await storage.snapshot(account: access.owner, suite: access.suite, after: after, limit: limit)
        return JSONBody.response(json: page.json(valueLimit: configuration.limits.maxValueBytes))
    }

    /// `GET …/keys/{key}/history`: the versions the server keeps of one key, newest first; 404
    /// `not_found` when it keeps none.
    func history(_ request: Request, _ context: TokenRequestContext) async throws -> Response {
        let access = try await authorized(request, context, need: .read)
        let suite = access.suite
        guard let key = (context.parameters.get("key") ?? "").removingPercentEncoding else {
            throw APIError.malformed("the key is not valid percent-encoding")
        }
        try PushValidation.checkKey(key, limits: configuration.limits)
        let versions = try await storage.history(account: access.owner, suite: suite, key: key)
        guard !versions.isEmpty else {
            throw APIError.notFound(
                configuration.quota.historyDepth == 0
                    ? "this server keeps no key history (--history 0)"
                    : "the server keeps no version of '\(key)' in \(suite): never written, or purged"
            )
        }
        return JSONBody.response(json: keyHistoryJSON(key: key, versions: versions, valueLimit: configuration.limits.maxValueBytes))
    }

    /// `GET …/history?after=&limit=`: a page of every key's history, in key order, each key whole
    /// (`SyncStore.history(account:suite:after:limit:)`); `limit` counts versions. Read as the
    /// snapshot is: the same access, the same page size.
    func suiteHistory(_ request: Request, _ context: TokenRequestContext) async throws -> Response {
        let access = try await authorized(request, context, need: .read)
        let query = request.uri.queryParameters
        let after = query["after"].map(String.init)
        let limit = try pageSize(query)
        let page = try await storage.history(account: access.owner, suite: access.suite, after: after, limit: limit)
        return JSONBody.response(json: page.json(valueLimit: configuration.limits.maxValueBytes))
    }

    /// `GET /v1/devices`: the account's devices that used a suite the token covers (and the token's
    /// own), each showing only the suites the token covers; the
    /// asking device (same token and `Device-ID`) is marked `current`.
    func devices(_ request: Request, _ context: TokenRequestContext) async throws -> Response {
        let token = context.token
        let asking = context.deviceID
        // A device record names a shared suite `owner/suite` (`SharingRule.deviceSuiteName`).
        let covers = { (suite: String) in token.covers(SharingRule.suiteName(inDeviceRecord: suite)) }
        // A device that used none of the token's suites is none of its business (a token for one
        // app's suites does not learn the names of the account's other devices).
        let devices = try await storage.devices(account: token.account)
        let now = Date()
        let active = try await storage.activeTokenIDs(account: token.account, at: now)
        let unverified = StoredDevice.unverified(among: devices, activeTokens: active)
        let list =
            devices
            .filter { $0.tokenID == token.id || $0.suites.contains(where: covers) }
            .map { device in
                device.info(
                    current: device.tokenID == token.id && device.deviceID == asking,
                    unverified: unverified[device.identity] != nil,
                    visibleSuites: covers
                )
            }
        return try JSONBody.response(DeviceList(devices: list))
    }

    /// `GET …/key-bags`: the suite's key epochs' keys sealed to its recovery key (opaque here),
    /// with their signatures and the suite's anchor; for the owner, the rotation due after a
    /// removal (`KeyRotationDue`), if any.
    func keyBags(_ request: Request, _ context: TokenRequestContext) async throws -> Response {
        let access = try await authorized(request, context, need: .read)
        var answer = KeyBagRule.answer(try await storage.keyBags(account: access.owner, suite: access.suite))
        if access.role == .owner { answer.rotationDue = try await storage.rotationDue(owner: access.owner, suite: access.suite) }
        return try JSONBody.response(answer)
    }

    /// `PUT …/key-bags`: stores the suite's anchor (`KeyBagRule.anchor`).
    func anchorKeyBags(_ request: Request, _ context: TokenRequestContext) async throws -> Response {
        let access = try await authorized(request, context, need: .write)
        let anchor = try await JSONBody.decode(KeyAnchor.self, from: request, limit: PairingRoutes.bodyLimit)
        try await storage.anchorKeyBags(account: access.owner, suite: access.suite, anchor: anchor)
        return try JSONBody.response(KeyBagRule.answer(try await storage.keyBags(account: access.owner, suite: access.suite)))
    }

    /// `PUT …/key-bags/{epoch}`: stores one epoch's sealed key, signed (after a rotation;
    /// `KeyBagRule.put`).
    func putKeyBag(_ request: Request, _ context: TokenRequestContext) async throws -> Response {
        let access = try await authorized(request, context, need: .write)
        let epoch = try Query.decimal(context.parameters.get("epoch") ?? "", name: "epoch")
        guard epoch >= 1, epoch <= UInt64(UInt32.max) else { throw APIError.malformed("epoch must be 1 to \(UInt32.max)") }
        let bag = try await JSONBody.decode(SignedKeyBag.self, from: request, limit: PairingRoutes.bodyLimit)
        try await access.checkMayRotate(storage, bag: bag)
        try await storage.putKeyBag(account: access.owner, suite: access.suite, epoch: UInt32(epoch), bag: bag)
        return try JSONBody.response(KeyBagRule.answer(try await storage.keyBags(account: access.owner, suite: access.suite)))
    }

    private func pageSize(_ query: Parameters) throws -> Int {
        guard let limit = try Query.unsigned(query, "limit") else { return configuration.maxPageSize }
        guard limit >= 1 else { throw APIError.malformed("limit must be at least 1") }
        return Int(min(limit, UInt64(configuration.maxPageSize)))
    }
}

/// Query parameters, strictly: a number is decimal digits only, or the request is 400.
enum Query {
    static func unsigned(_ query: Parameters, _ name: String) throws -> UInt64? {
        guard let text = query[name[...]] else { return nil }
        return try decimal(String(text), name: name)
    }

    /// `text` as an unsigned 64-bit number written in decimal digits only; 400 `malformed` otherwise.
    static func decimal(_ text: String, name: String) throws -> UInt64 {
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), let value = UInt64(text) else {
            throw APIError.malformed("\(name) must be a non-negative decimal integer, not '\(text.prefix(64))'")
        }
        return value
    }
}

/// `GET /v1/limits`' body: the limits, and the server's version beside them (`version`).
struct PublishedLimits: Encodable {
    var limits: SyncLimits
    var version = packageVersion

    private enum CodingKeys: String, CodingKey { case version }

    func encode(to encoder: any Encoder) throws {
        try limits.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(version, forKey: .version)
    }
}
