import Foundation
import GroupDefaultsWire
import Hummingbird
import Logging
import NIOCore
import Synchronization

/// The operator console at `/console`: server-rendered pages (`ConsoleTemplates`), plain forms
/// that POST then redirect, and a live tail of a suite's changes as Server-Sent Events.
///
/// Who may see it: an operator (`groupdefaults-server admin create`) signed in with a session
/// cookie (HttpOnly, SameSite=Strict, Secure under TLS, `ConsoleSessions`' lifetime). Sync tokens
/// never sign in here, and the session cookie is scoped to `/console`, so it never reaches `/v1`.
/// Every form carries the session's token (`csrf`); the sign-in form carries one paired with a
/// cookie of its own.
struct ConsoleRoutes: Sendable {
    /// What the console reads and changes: suites and their entries, tokens, devices, the
    /// operator's view and reset, its own records, and the backend's health.
    typealias Storage = SyncStore & TokenStore & DeviceStore & SuiteAdmin & ConsoleRecordStore & StorageHealthCheck & AuditStore
        & SharingStore

    let storage: any Storage
    let configuration: ServerConfiguration
    let activity: ConsoleActivity
    let operators: Operators
    let sessions: ConsoleSessions
    let throttle: SignInThrottle
    let newTokens = NewTokenNotes()

    static let sessionCookie = "gd_console"
    static let signInCookie = "gd_console_signin"
    /// The most keys a suite page lists (a filter narrows them).
    static let keysShown = 500

    init(storage: any Storage, configuration: ServerConfiguration, activity: ConsoleActivity) {
        self.storage = storage
        self.configuration = configuration
        self.activity = activity
        operators = Operators(storage: storage)
        sessions = ConsoleSessions(storage: storage, lifetime: configuration.console.sessionLifetime)
        throttle = SignInThrottle(failures: configuration.console.signInFailures, window: configuration.console.signInWindow)
    }

    func register(on router: Router<ServerRequestContext>) {
        let console = router.group("console").add(middleware: ConsoleMiddleware())
        console.get { request, context in try await overview(request, context) }
        console.get("sign-in") { request, context in try await signInPage(request, context) }
        console.post("sign-in") { request, context in try await signIn(request, context) }
        console.post("sign-out") { request, context in try await signOut(request, context) }
        console.get("assets/console.css") { _, _ in Self.asset(ConsoleAssets.stylesheet, type: "text/css; charset=utf-8") }
        console.get("assets/console.js") { _, _ in Self.asset(ConsoleAssets.script, type: "text/javascript; charset=utf-8") }
        console.get("accounts") { request, _ -> Response in
            let name = ConsoleQuery.value("name", in: request) ?? ""
            throw ConsoleRedirect(location: name.isEmpty ? ConsolePaths.root : ConsolePaths.account(name))
        }
        console.get("accounts/{account}") { request, context in try await accountPage(request, context) }
        console.get("audit") { request, context in try await auditPage(request, context) }
        console.post("accounts/{account}/tokens") { request, context in try await createToken(request, context) }
        console.post("accounts/{account}/tokens/{token}/revoke") { request, context in try await revokeToken(request, context) }
        console.post("accounts/{account}/devices/{device}/revoke") { request, context in try await revokeDevice(request, context) }
        console.get("accounts/{account}/suites/{suite}") { request, context in try await suitePage(request, context) }
        console.get("accounts/{account}/suites/{suite}/history") { request, context in try await historyPage(request, context) }
        console.get("accounts/{account}/suites/{suite}/tail") { request, context in try await tail(request, context) }
        console.post("accounts/{account}/suites/{suite}/members/{member}/remove") { request, context in
            try await removeMember(request, context)
        }
    }

    // MARK: Signing in and out

    /// The signed-in operator's session, or a redirect to the sign-in page.
    private func signedIn(_ request: Request) async throws -> SignedIn {
        guard let cookie = request.cookies[Self.sessionCookie]?.value, !cookie.isEmpty,
            let session = try await sessions.session(cookie: cookie)
        else { throw ConsoleRedirect(location: ConsolePaths.signIn) }
        return SignedIn(cookie: cookie, session: session)
    }

    private func signInPage(_ request: Request, _ context: ServerRequestContext) async throws -> Response {
        if let cookie = request.cookies[Self.sessionCookie]?.value, try await sessions.session(cookie: cookie) != nil {
            throw ConsoleRedirect(location: ConsolePaths.root)
        }
        return signInForm(error: nil, name: "", status: .ok)
    }

    /// The sign-in form with a fresh form token, set beside it as a cookie the POST must match.
    private func signInForm(error: String?, name: String, status: HTTPResponse.Status) -> Response {
        let token = ConsoleSessions.randomToken()
        let page = SignInPage(page: PageChrome(title: "Sign in", operatorName: nil, csrf: token), name: name, error: error)
        var response = ConsolePage.html(ConsoleTemplates.render(page, "sign-in"), status: status)
        response.setCookie(cookie(Self.signInCookie, token, path: ConsolePaths.signIn, maxAge: 3600))
        return response
    }

    private func signIn(_ request: Request, _ context: ServerRequestContext) async throws -> Response {
        let expected = request.cookies[Self.signInCookie]?.value ?? ""
        let form = try await Self.form(request, as: SignInForm.self, limit: Self.signInFormLimit)
        guard !expected.isEmpty, ConsoleSessions.same(form.csrf ?? "", expected) else { throw ConsoleError.crossSite }
        let address = context.clientAddress ?? "unknown"
        // A name no operator can have is a failed sign-in that reaches neither storage nor the log.
        let typed = form.name ?? ""
        let valid = Operators.problem(withName: typed) == nil
        let name = valid ? typed : ""
        let throttled = valid ? typed : "(not a name)"
        switch throttle.admit(address: address, name: throttled) {
        case .admitted: break
        case .refused(let wait):
            let minutes = max(1, Int((Double(wait.components.seconds) / 60).rounded(.up)))
            var response = signInForm(
                error: "Too many failed sign-ins: try again in \(minutes) minute\(minutes == 1 ? "" : "s").",
                name: name,
                status: .tooManyRequests
            )
            response.headers[.retryAfter] = "\(max(1, wait.components.seconds))"
            return response
        case .busy:
            var response = signInForm(
                error: "Too many sign-ins at once from this address: try again in a moment.",
                name: name,
                status: .tooManyRequests
            )
            response.headers[.retryAfter] = "1"
            return response
        }
        let found: StoredOperator?
        do {
            // Checked in this address's turn (`SignInThrottle.check`): another address's flood
            // cannot make this sign-in wait behind it, nor fail.
            found = valid ? try await throttle.check(address: address) { try await operators.verify(name: name, password: form.password ?? "") } : nil
        } catch {
            throttle.finished(address: address, name: throttled, succeeded: false)
            throw error
        }
        throttle.finished(address: address, name: throttled, succeeded: found != nil)
        guard let found else {
            // Not the name: a password typed into the name field must not reach the log.
            context.logger.notice("console sign-in refused", metadata: ["address": "\(address)"])
            try await audit(.signInFailed, by: "unknown", context, outcome: "failed")
            return signInForm(error: "Wrong name or password.", name: name, status: .unauthorized)
        }
        let started = try await sessions.start(operatorName: found.name)
        context.logger.info("console sign-in", metadata: ["operator": "\(found.name)", "address": "\(address)"])
        try await audit(.signIn, by: found.name, context)
        var response = ConsoleRedirect(location: ConsolePaths.root).response
        response.setCookie(
            cookie(
                Self.sessionCookie,
                started.cookie,
                path: ConsolePaths.root,
                maxAge: Int(sessions.lifetime.components.seconds)
            )
        )
        response.setCookie(cookie(Self.signInCookie, "", path: ConsolePaths.signIn, maxAge: 0))
        return response
    }

    private func signOut(_ request: Request, _ context: ServerRequestContext) async throws -> Response {
        let signed = try await signedIn(request)
        try await checkForm(request, signed, as: CSRFForm.self)
        try await sessions.end(cookie: signed.cookie)
        var response = ConsoleRedirect(location: ConsolePaths.signIn).response
        response.setCookie(cookie(Self.sessionCookie, "", path: ConsolePaths.root, maxAge: 0))
        return response
    }

    /// A cookie of the console: HttpOnly, SameSite=Strict, Secure when served over TLS.
    private func cookie(_ name: String, _ value: String, path: String, maxAge: Int) -> Cookie {
        Cookie(name: name, value: value, maxAge: maxAge, path: path, secure: configuration.tls != nil, httpOnly: true, sameSite: .strict)
    }

    // MARK: Pages

    private func chrome(_ title: String, _ signed: SignedIn, trail: [Link] = []) -> PageChrome {
        PageChrome(title: title, operatorName: signed.session.operatorName, csrf: signed.session.csrf, trail: trail)
    }

    private func overview(_ request: Request, _ context: ServerRequestContext) async throws -> Response {
        let signed = try await signedIn(request)
        async let summaries = storage.suiteSummaries(account: nil)
        async let tokens = storage.tokens()
        async let devices = storage.devices(account: nil)
        async let health = storage.health()
        let (allSuites, allTokens, allDevices) = try await (summaries, tokens, devices)
        let now = Date()
        let dayAgo = UInt64(max(0, now.timeIntervalSince1970 - 86_400) * 1000)
        let names = Set(allSuites.map(\.account.exact)).union(allTokens.map(\.account.exact)).union(allDevices.map(\.account.exact))
        let accounts = names.sorted().map(\.text).map { name in
            let suites = allSuites.filter { $0.account.isSameName(as: name) }
            return OverviewPage.Account(
                name: name,
                href: ConsolePaths.account(name),
                suites: suites.count,
                keys: suites.map(\.keys).reduce(0, +),
                bytes: ConsoleFormat.bytes(suites.map(\.bytes).reduce(0, +)),
                devicesToday: allDevices.filter { $0.account.isSameName(as: name) && $0.lastSeen >= dayAgo }.count,
                activeTokens: allTokens.filter { $0.account.isSameName(as: name) && $0.isActive(at: now) }.count
            )
        }
        let storageHealth = await health
        let minutes = activity.lastHour(now: now)
        // The tile and the chart's "now" are one figure: the streams open at the end of this minute
        // (the chart's line is each minute's peak).
        let openStreams = minutes.last?.endStreams ?? 0
        let page = OverviewPage(
            page: chrome("Overview", signed),
            accounts: accounts,
            accountCount: accounts.count,
            suites: allSuites.count,
            keys: allSuites.map(\.keys).reduce(0, +),
            bytes: ConsoleFormat.bytes(allSuites.map(\.bytes).reduce(0, +)),
            devicesToday: allDevices.filter { $0.lastSeen >= dayAgo }.count,
            openStreams: openStreams,
            health: .init(backend: storageHealth.backend, checks: storageHealth.checks, ok: storageHealth.checks.allSatisfy(\.ok)),
            pushesChart: Chart(id: "chart-pushes", label: "Pushes per minute, last hour", values: minutes.map(\.pushes)),
            streamsChart: Chart(
                id: "chart-streams",
                label: "Open event streams, last hour",
                values: minutes.map(\.peakStreams),
                latest: openStreams
            )
        )
        return ConsolePage.html(ConsoleTemplates.render(page, "overview"))
    }

    private func accountPage(_ request: Request, _ context: ServerRequestContext) async throws -> Response {
        let signed = try await signedIn(request)
        let account = try Self.name(context, "account")
        async let summaries = storage.suiteSummaries(account: account)
        async let tokens = storage.tokens(account: account)
        async let devices = storage.devices(account: account)
        let (suites, accountTokens, accountDevices) = try await (summaries, tokens, devices)
        let now = Date()
        let limits = configuration.limits
        // An account is what its tokens, suites and devices make it: with none, there is no such account.
        guard !(suites.isEmpty && accountTokens.isEmpty && accountDevices.isEmpty) else {
            throw ConsoleError(
                .notFound,
                "There is no account \(account): no token, suite or device has that name. "
                    + "An account begins with its first token: groupdefaults-server token create --account \(account)"
            )
        }
        let revokedTokens = Set(accountTokens.filter { !$0.isActive(at: now) }.map(\.id))
        let message: String? =
            switch ConsoleQuery.value("done", in: request) {
            case "token-revoked": "The token was revoked: its next request is refused, and its event streams end."
            case "device-revoked": "The device's token was revoked: its next sync is refused."
            default: nil
            }
        let page = AccountPage(
            page: chrome(account, signed, trail: [Link(text: "Overview", href: ConsolePaths.root)]),
            account: account,
            suites: suites.map { suite in
                AccountPage.Suite(
                    name: suite.name,
                    href: ConsolePaths.suite(account, suite.name),
                    keys: suite.keys,
                    maxKeys: limits.maxKeysPerSuite,
                    bytes: ConsoleFormat.bytes(suite.bytes),
                    byteCount: suite.bytes,
                    maxBytes: limits.maxBytesPerSuite,
                    maxBytesText: ConsoleFormat.bytes(limits.maxBytesPerSuite),
                    headRev: suite.headRev
                )
            },
            tokens: accountTokens.map { token in
                AccountPage.Token(
                    id: token.id,
                    device: token.device,
                    patterns: token.suitePatterns.joined(separator: ", "),
                    readOnly: token.readOnly,
                    created: TimeText(token.created),
                    expires: token.expires.map(TimeText.init),
                    revoked: token.revoked.map(TimeText.init) ?? (token.isActive(at: now) ? nil : token.expires.map(TimeText.init)),
                    revokeHref: ConsolePaths.account(account) + "/tokens/\(ConsolePaths.segment(token.id))/revoke"
                )
            },
            devices: accountDevices.map { device in
                AccountPage.Device(
                    id: device.id,
                    name: device.name ?? "unnamed",
                    deviceID: "\(device.deviceID)",
                    tokenID: device.tokenID,
                    firstSeen: TimeText(milliseconds: device.firstSeen),
                    lastSeen: TimeText(milliseconds: device.lastSeen),
                    lastPush: device.lastPush.map { TimeText(milliseconds: $0) },
                    suites: device.suites.joined(separator: ", "),
                    revoked: revokedTokens.contains(device.tokenID),
                    revokeHref: ConsolePaths.account(account) + "/devices/\(ConsolePaths.segment(device.id))/revoke"
                )
            },
            newToken: newTokens.take(session: signed.cookie, account: account),
            serverURL: (configuration.tls == nil ? "http://" : "https://")
                + (request.head.authority ?? "\(configuration.host):\(configuration.port)"),
            message: message,
            createHref: ConsolePaths.account(account) + "/tokens"
        )
        return ConsolePage.html(ConsoleTemplates.render(page, "account"))
    }

    private func suitePage(_ request: Request, _ context: ServerRequestContext) async throws -> Response {
        let signed = try await signedIn(request)
        let account = try Self.name(context, "account")
        let suite = try Self.name(context, "suite")
        let filter = ConsoleQuery.value("key", in: request) ?? ""
        let devices = try await storage.devices(account: account)
        var keys: [SuitePage.Key] = []
        var total = 0
        var truncated = false
        var head: UInt64 = 0
        var after: String?
        repeat {
            let page = try await storage.snapshot(account: account, suite: suite, after: after, limit: configuration.maxPageSize).page()
            head = max(head, page.headRev)
            for entry in page.entries {
                total += 1
                guard filter.isEmpty || entry.key.localizedCaseInsensitiveContains(filter) else { continue }
                guard keys.count < Self.keysShown else {
                    truncated = true
                    continue
                }
                keys.append(
                    SuitePage.Key(
                        key: entry.key,
                        historyHref: ConsolePaths.history(account, suite, key: entry.key),
                        value: ConsoleFormat.value(of: entry),
                        deleted: entry.isDeleted,
                        writer: ConsoleFormat.writer(origin: entry.origin, devices: devices),
                        written: TimeText(milliseconds: entry.hlc.milliseconds, showingMilliseconds: true),
                        rev: entry.rev ?? 0
                    )
                )
            }
            after = page.next
        } while after != nil
        let members = try await storage.members(owner: account, suite: suite)
        let invitations = try await storage.invitations(owner: account, suite: suite)
        let pinned = try await storage.pinnedKeys(owner: account, suite: suite).map(\.key)
        // A suite nothing was ever written to, and nobody shares, is no suite of the account's (a
        // typed URL, another account's name).
        if head == 0, total == 0, members.isEmpty, invitations.isEmpty,
            !(try await storage.suiteSummaries(account: account)).contains(where: { $0.name.isSameName(as: suite) })
        {
            throw ConsoleError(.notFound, "The account \(account) has no suite \(suite).")
        }
        let now = Date()
        let accountLink = Link(text: account, href: ConsolePaths.account(account))
        let page = SuitePage(
            page: chrome(suite, signed, trail: [Link(text: "Overview", href: ConsolePaths.root), accountLink]),
            account: account,
            suite: suite,
            href: ConsolePaths.suite(account, suite),
            filter: filter,
            keys: keys,
            shown: keys.count,
            total: total,
            truncated: truncated,
            holdsNoKeys: total == 0,
            tailHref: ConsolePaths.tail(account, suite),
            headRev: head,
            accountHref: ConsolePaths.account(account),
            members: members.map { member in
                SuitePage.Member(
                    account: member.account,
                    href: ConsolePaths.account(member.account),
                    role: member.role.rawValue,
                    added: TimeText(member.added),
                    removeAction: ConsolePaths.removeMember(account, suite, member: member.account)
                )
            },
            invitations: invitations.map { invitation in
                SuitePage.Invitation(
                    id: invitation.id,
                    role: invitation.role.rawValue,
                    state: invitation.state(at: now).rawValue,
                    createdBy: invitation.createdBy,
                    acceptedBy: invitation.acceptedBy ?? "",
                    expires: TimeText(invitation.expires)
                )
            },
            pinned: pinned,
            hasPins: !pinned.isEmpty,
            isShared: !members.isEmpty,
            hasInvitations: !invitations.isEmpty,
            message: Self.removalMessage(ConsoleQuery.value("done", in: request)),
            rotationDue: try await storage.rotationDue(owner: account, suite: suite).map { due in
                "Key rotation due since \(due.since): \(due.removed.joined(separator: ", ")) held the suite's keys when removed. "
                    + "The owner's devices rotate the key at their next sync (groupdefaults-sync sync or run)."
            }
        )
        return ConsolePage.html(ConsoleTemplates.render(page, "suite"))
    }

    private func historyPage(_ request: Request, _ context: ServerRequestContext) async throws -> Response {
        let signed = try await signedIn(request)
        let account = try Self.name(context, "account")
        let suite = try Self.name(context, "suite")
        guard let key = ConsoleQuery.value("key", in: request), !key.isEmpty else {
            throw ConsoleError(.badRequest, "Which key? The history page needs ?key=.")
        }
        guard configuration.limits.breach(key: key, value: nil, sealedBytes: nil, valueJSONBytes: nil) == nil,
            !key.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
        else {
            throw ConsoleError(.badRequest, "That is not a key a suite can hold (too long, or with a control character).")
        }
        async let versions = storage.history(account: account, suite: suite, key: key)
        async let devices = storage.devices(account: account)
        let (kept, known) = try await (versions, devices)
        let page = HistoryPage(
            page: chrome(
                key,
                signed,
                trail: [
                    Link(text: "Overview", href: ConsolePaths.root), Link(text: account, href: ConsolePaths.account(account)),
                    Link(text: suite, href: ConsolePaths.suite(account, suite)),
                ]
            ),
            account: account,
            suite: suite,
            key: key,
            versions: try kept.map { version in
                let entry = try version.entry.syncEntry()
                return HistoryPage.Version(
                    value: ConsoleFormat.value(of: entry),
                    deleted: entry.isDeleted,
                    writer: ConsoleFormat.writer(origin: entry.origin, devices: known),
                    written: TimeText(milliseconds: entry.hlc.milliseconds, showingMilliseconds: true),
                    received: TimeText(milliseconds: version.receivedMilliseconds, showingMilliseconds: true),
                    rev: entry.rev ?? 0
                )
            },
            suiteHref: ConsolePaths.suite(account, suite)
        )
        return ConsolePage.html(ConsoleTemplates.render(page, "history"))
    }

    // MARK: Forms

    private func createToken(_ request: Request, _ context: ServerRequestContext) async throws -> Response {
        let signed = try await signedIn(request)
        let form = try await checkForm(request, signed, as: CreateTokenForm.self)
        let account: String
        do {
            account = try NewNames.resolve(
                try Self.name(context, "account"),
                kind: .account,
                existing: try await storage.accountSummaries().map(\.account)
            ).name
        } catch let refusal as NewNames.Refusal {
            throw ConsoleError(refusal.isCollision ? .conflict : .unprocessableContent, refusal.description)
        }
        let device = (form.device ?? "").trimmingCharacters(in: .whitespaces)
        if !device.isEmpty, let problem = NameKind.device.problem(with: device) { throw ConsoleError(.unprocessableContent, problem) }
        let patterns = (form.suites ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard !patterns.isEmpty else { throw ConsoleError(.unprocessableContent, "A token needs at least one suite pattern ('*' for every suite).") }
        for pattern in patterns {
            do { _ = try GlobPattern(pattern) } catch { throw ConsoleError(.unprocessableContent, "\(error)") }
        }
        let made = Tokens.make(
            account: account,
            suitePatterns: patterns,
            readOnly: form.readOnly == "on",
            device: device.isEmpty ? nil : device,
            expires: nil
        )
        try await storage.createToken(made.stored)
        context.logger.info(
            "console created a token",
            metadata: [
                "operator": "\(signed.session.operatorName)", "account": "\(account)", "token": "\(made.stored.id)",
            ]
        )
        try await audit(.tokenCreate, by: signed.session.operatorName, context, account: account, target: "token \(made.stored.id)")
        newTokens.put(made.token, session: signed.cookie, account: account)
        throw ConsoleRedirect(location: ConsolePaths.account(account))
    }

    private func revokeToken(_ request: Request, _ context: ServerRequestContext) async throws -> Response {
        let signed = try await signedIn(request)
        let account = try Self.name(context, "account")
        let id = try Self.name(context, "token")
        try await checkForm(request, signed, as: CSRFForm.self)
        guard try await storage.token(id: id)?.account.isSameName(as: account) == true else {
            throw ConsoleError(.notFound, "The account \(account) has no token \(id).")
        }
        try await storage.revokeToken(id: id, at: Date())
        context.logger.info("console revoked a token", metadata: ["operator": "\(signed.session.operatorName)", "token": "\(id)"])
        try await audit(.tokenRevoke, by: signed.session.operatorName, context, account: account, target: "token \(id)")
        throw ConsoleRedirect(location: ConsolePaths.account(account) + "?done=token-revoked")
    }

    private func revokeDevice(_ request: Request, _ context: ServerRequestContext) async throws -> Response {
        let signed = try await signedIn(request)
        let account = try Self.name(context, "account")
        let id = try Self.name(context, "device")
        try await checkForm(request, signed, as: CSRFForm.self)
        let device: StoredDevice
        switch try await storage.revokeDevice(id: id, account: account, at: Date()) {
        case .notFound: throw ConsoleError(.notFound, "The account \(account) has no device \(id).")
        case .ambiguous(let matching):
            throw ConsoleError(.conflict, "\(matching.count) devices have the id \(id): revoke one of their tokens instead.")
        case .revoked(let revoked, _): device = revoked
        }
        context.logger.info(
            "console revoked a device",
            metadata: [
                "operator": "\(signed.session.operatorName)", "device": "\(id)", "token": "\(device.tokenID)",
            ]
        )
        try await audit(.deviceRevoke, by: signed.session.operatorName, context, account: account, target: "device \(id) (token \(device.tokenID))")
        throw ConsoleRedirect(location: ConsolePaths.account(account) + "?done=device-revoked")
    }

    /// What the suite page says after a removal (`?done=`), if it follows one.
    private static func removalMessage(_ done: String?) -> String? {
        switch done {
        case "member-removed": "Removed: the member's devices lose access at once."
        case "member-removed-rotation-due":
            "Removed; the owner's devices will rotate the suite's key at their next sync (the member's devices hold the current one)."
        default: nil
        }
    }

    /// Removes a member from one of the account's suites: its devices lose access at once
    /// (`SharingStore.removeMember`), audited.
    private func removeMember(_ request: Request, _ context: ServerRequestContext) async throws -> Response {
        let signed = try await signedIn(request)
        let account = try Self.name(context, "account")
        let suite = try Self.name(context, "suite")
        let member = try Self.name(context, "member")
        try await checkForm(request, signed, as: CSRFForm.self)
        let held = try await storage.member(owner: account, suite: suite, account: member)
        guard try await storage.removeMember(owner: account, suite: suite, account: member) else {
            throw ConsoleError(.notFound, "\(member) is not a member of \(account)'s suite \(suite).")
        }
        // A member that held an encrypted suite's keys: the owner's devices rotate at their next sync.
        let rotationDue = held?.admission == nil ? false : try await storage.rotationDue(owner: account, suite: suite) != nil
        context.logger.info(
            "console removed a member",
            metadata: ["operator": "\(signed.session.operatorName)", "suite": "\(suite)", "member": "\(member)"]
        )
        try await audit(.memberRemove, by: signed.session.operatorName, context, account: account, target: "member \(member) of suite \(suite)")
        throw ConsoleRedirect(
            location: ConsolePaths.suite(account, suite) + "?done=" + (rotationDue ? "member-removed-rotation-due" : "member-removed") + "#sharing"
        )
    }

    /// The audit log's latest records (of `?account=`, if given), newest first, or those before
    /// `?before=` (a page's link to the earlier records: `AuditStore.auditPage`).
    private func auditPage(_ request: Request, _ context: ServerRequestContext) async throws -> Response {
        let signed = try await signedIn(request)
        let account = ConsoleQuery.value("account", in: request).flatMap { $0.isEmpty ? nil : $0 }
        if let account, let problem = NameKind.account.problem(withStored: account) { throw ConsoleError(.badRequest, problem) }
        let before = try ConsoleQuery.value("before", in: request).flatMap { text -> Date? in
            if text.isEmpty { return nil }
            guard let date = TypedJSONDate.parse(text) else {
                throw ConsoleError(.badRequest, "before= takes a UTC time such as 2026-11-27T09:00:00.000Z")
            }
            return date
        }
        let shown = 500
        let found = try await storage.auditPage(account: account, since: nil, before: before, limit: shown)
        let records = found.records
        let page = AuditPage(
            page: chrome("Audit log", signed, trail: [Link(text: "Overview", href: ConsolePaths.root)]),
            account: account,
            shown: shown,
            days: configuration.auditLifetime.components.seconds / 86_400,
            records: records.reversed().map { record in
                AuditPage.Row(
                    time: TimeText(milliseconds: UInt64(max(0, record.time.timeIntervalSince1970 * 1000))),
                    act: record.act.rawValue,
                    account: record.account ?? "",
                    target: record.target ?? "",
                    actor: record.actor,
                    source: record.source,
                    outcome: record.outcome ?? ""
                )
            },
            before: before.flatMap(TypedJSONDate.format),
            earlier: found.earlier.map { ConsolePaths.audit(before: $0, account: account) },
            latest: before == nil ? nil : ConsolePaths.audit(before: nil, account: account)
        )
        return ConsolePage.html(ConsoleTemplates.render(page, "audit"))
    }

    /// Records an act done in the console: by an operator (or `unknown`), from the client's address.
    private func audit(
        _ act: AuditRecord.Act,
        by actor: String,
        _ context: ServerRequestContext,
        account: String? = nil,
        target: String? = nil,
        outcome: String? = nil
    ) async throws {
        let source = "console, " + (context.clientAddress ?? "unknown address")
        try await storage.appendAudit(AuditRecord(actor: actor, act: act, account: account, target: target, source: source, outcome: outcome))
    }

    /// The form, if it carries the session's form token; `ConsoleError.crossSite` otherwise.
    @discardableResult
    private func checkForm<Form: Decodable & CSRFCarrying>(_ request: Request, _ signed: SignedIn, as type: Form.Type) async throws -> Form {
        let form = try await Self.form(request, as: type)
        guard let token = form.csrf, ConsoleSessions.same(token, signed.session.csrf) else { throw ConsoleError.crossSite }
        return form
    }

    /// The most the sign-in form may hold: it is read before anything authenticates it, and a name,
    /// a password (72 bytes at most) and the form token fit many times over.
    static let signInFormLimit = 4 * 1024

    /// The form of `request`, of at most `limit` bytes (refused at once if its `Content-Length`
    /// says more: nothing waits for a body too large).
    private static func form<Form: Decodable>(_ request: Request, as type: Form.Type, limit: Int = 64 * 1024) async throws -> Form {
        let tooLarge = ConsoleError(.contentTooLarge, "The form is larger than \(limit / 1024) KiB.")
        if let length = request.headers[.contentLength].flatMap({ Int($0) }), length > limit { throw tooLarge }
        var request = request
        let body: ByteBuffer
        do {
            body = try await request.collectBody(upTo: limit)
        } catch is NIOTooManyBytesError {
            throw tooLarge
        }
        do {
            return try URLEncodedFormDecoder().decode(type, from: String(buffer: body))
        } catch {
            throw ConsoleError(.badRequest, "The form could not be read: send it from the console's page.")
        }
    }

    // MARK: Live tail

    /// `…/suites/{suite}/tail`: the suite's changes from now on as Server-Sent Events (`change`,
    /// data: the row as JSON), a heartbeat comment after each quiet `eventHeartbeat`, and `end`
    /// when the session ends. Graceful shutdown ends it too.
    private func tail(_ request: Request, _ context: ServerRequestContext) async throws -> Response {
        let signed = try await signedIn(request)
        let account = try Self.name(context, "account")
        let suite = try Self.name(context, "suite")
        let start = try await storage.headRevision(account: account, suite: suite)
        let storage = self.storage
        let sessions = self.sessions
        let pageSize = configuration.maxPageSize
        let loop = ChangeStreamLoop(
            storage: storage,
            account: account,
            suite: suite,
            heartbeat: configuration.eventHeartbeat,
            retryMilliseconds: 3000
        ) { since, _ in  // a task-run stream: never a quiet turn
            guard try await sessions.session(cookie: signed.cookie) != nil else {
                return StreamTurn(text: ServerSentEvent(event: "end", data: "signed out").encoded, ends: true)
            }
            let page = try await storage.changes(account: account, suite: suite, since: since, limit: pageSize).page()
            guard !page.entries.isEmpty else { return StreamTurn(text: "", ends: false, head: page.lastRev) }
            let devices = try await storage.devices(account: account)
            let encoder = JSONEncoder()
            var text = ""
            for entry in page.entries {
                let change = TailChange(
                    key: printable(entry.key),
                    value: ConsoleFormat.printableLines(ConsoleFormat.value(of: entry)),
                    deleted: entry.isDeleted,
                    writer: printable(ConsoleFormat.writer(origin: entry.origin, devices: devices)),
                    written: TimeText(milliseconds: entry.hlc.milliseconds, showingMilliseconds: true).text,
                    rev: entry.rev ?? 0
                )
                text +=
                    ServerSentEvent(
                        id: "\(entry.rev ?? 0)",
                        event: "change",
                        data: String(decoding: try encoder.encode(change), as: UTF8.self)
                    ).encoded
            }
            return StreamTurn(text: text, ends: false, head: page.lastRev, hasMore: page.hasMore)
        }
        let body = ResponseBody { writer in try await loop.run(from: start, writer: &writer) }
        return Response(status: .ok, headers: [.contentType: "text/event-stream", .cacheControl: "no-store"], body: body)
    }

    // MARK: Helpers

    /// A path parameter, percent-decoded; an account or suite name checked as `Names` checks them.
    private static func name(_ context: ServerRequestContext, _ parameter: String) throws -> String {
        guard let name = (context.parameters.get(parameter) ?? "").removingPercentEncoding, !name.isEmpty else {
            throw ConsoleError(.notFound, "That \(parameter) name is not valid percent-encoding.")
        }
        if let kind = NameKind(rawValue: parameter), kind == .account || kind == .suite, let problem = kind.problem(withStored: name) {
            throw ConsoleError(.notFound, problem)
        }
        return name
    }

    private static func asset(_ text: String, type: String) -> Response {
        Response(
            status: .ok,
            headers: [.contentType: type, .cacheControl: "no-cache"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: text))
        )
    }
}

/// A request's signed-in session and the cookie that named it.
struct SignedIn: Sendable {
    var cookie: String
    var session: StoredConsoleSession
}

/// A form that carries the console's form token.
protocol CSRFCarrying {
    var csrf: String? { get }
}

struct CSRFForm: Decodable, CSRFCarrying {
    var csrf: String?
}

struct SignInForm: Decodable, CSRFCarrying {
    var csrf: String?
    var name: String?
    var password: String?
}

struct CreateTokenForm: Decodable, CSRFCarrying {
    var csrf: String?
    var device: String?
    var suites: String?
    var readOnly: String?

    enum CodingKeys: String, CodingKey {
        case csrf, device, suites
        case readOnly = "read_only"
    }
}

/// One row of the live tail, as its event's data.
private struct TailChange: Encodable {
    var key: String
    var value: String
    var deleted: Bool
    var writer: String
    var written: String
    var rev: UInt64
}

/// A token made in the console, held until its account page shows it once to the session that
/// made it (at most 10 minutes; in this instance's memory only, never stored or logged).
final class NewTokenNotes: Sendable {
    private struct Note {
        var token: String
        var account: String
        var until: ContinuousClock.Instant
    }

    private let notes = Mutex<[String: Note]>([:])

    func put(_ token: String, session: String, account: String) {
        let key = ConsoleSessions.hash(session)
        notes.withLock { notes in
            let now = ContinuousClock.now
            notes = notes.filter { $0.value.until > now }
            notes[key] = Note(token: token, account: account, until: now + .seconds(600))
        }
    }

    /// The token made by `session` for `account`, once.
    func take(session: String, account: String) -> String? {
        let key = ConsoleSessions.hash(session)
        return notes.withLock { notes in
            guard let note = notes[key], note.account.isSameName(as: account), note.until > .now else { return nil }
            notes[key] = nil
            return note.token
        }
    }
}

/// A query parameter as a browser sends it from a GET form: `+` is a space, `%XX` a byte.
enum ConsoleQuery {
    static func value(_ name: String, in request: Request) -> String? {
        guard let query = request.uri.query else { return nil }
        for pair in query.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard decode(parts[0]) == name else { continue }
            return parts.count > 1 ? decode(parts[1]) ?? "" : ""
        }
        return nil
    }

    private static func decode(_ text: Substring) -> String? {
        text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding
    }
}
