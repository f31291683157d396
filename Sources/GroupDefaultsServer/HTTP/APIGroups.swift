import GroupDefaultsWire
import Hummingbird

/// The groups of the `/v1` routes, each with what its routes need before their handlers run:
/// - open (health, limits): nothing;
/// - token (suites, devices, invitations, making and completing or cancelling a pairing): a valid bearer token
///   (401 before anything else, `TokenAuthentication`), then the token's rate limit (429); its
///   handlers get a `TokenRequestContext`, whose token is always there;
/// - a pairing's state: the token if the request has one (the claiming device reads it without
///   one), then the rate limit of the token, or of the client address;
/// - a pairing's claim: no token (the pairing id is its credential), the client address's rate
///   limit.
struct APIGroups: Sendable {
    let authenticator: Authenticator
    /// One bucket per token or client address, whichever group the request comes through.
    let limiter: RateLimiter
    /// The accounts' incarnations the token group's suite routes check (`AccountIncarnationCheck`).
    let incarnations: AccountIncarnations

    /// Where the token group's routes are, under `/v1`: every route below them needs a token.
    static let tokenPaths = ["suites", "devices", "invitations"]
    /// Where the pairing routes are, under `/v1`: the claim and reading a pairing's state take no
    /// token; the rest does.
    static let pairingPath = "pairings"

    /// Health and limits: no token, no rate limit.
    func open(_ router: Router<ServerRequestContext>) -> RouterGroup<ServerRequestContext> {
        router.group("v1")
    }

    /// The routes that need a token: authenticated, then limited by the token; a suite route checks
    /// the account incarnation the request names (`AccountIncarnationCheck`).
    func token(_ router: Router<ServerRequestContext>) -> RouterGroup<TokenRequestContext> {
        router.group("v1")
            .add(middleware: TokenAuthentication(authenticator: authenticator))
            .add(middleware: AccountIncarnationMiddleware(incarnations: incarnations))
            .group(context: TokenRequestContext.self)
            .add(middleware: RateLimitMiddleware<TokenRequestContext>(limiter: limiter))
    }

    /// A pairing's state: authenticated if the request has a token, then limited by it or by the
    /// client address.
    func pairingState(_ router: Router<ServerRequestContext>) -> RouterGroup<ServerRequestContext> {
        router.group("v1")
            .add(middleware: TokenAuthentication(authenticator: authenticator, need: .ifPresented))
            .add(middleware: RateLimitMiddleware<ServerRequestContext>(limiter: limiter))
    }

    /// A pairing's claim: limited by the client address.
    func pairingClaim(_ router: Router<ServerRequestContext>) -> RouterGroup<ServerRequestContext> {
        router.group("v1").add(middleware: RateLimitMiddleware<ServerRequestContext>(limiter: limiter))
    }

    /// What a request that matches no route goes through, added to the router after every route
    /// (Hummingbird applies a router middleware to the routes added after it, and to the answer for
    /// no route): so that an unknown path or method under the token group's paths is 401 without a
    /// valid token, before it is 404, as it would be if it were a route of the group.
    var unknownRoutes: UnknownRouteMiddleware {
        UnknownRouteMiddleware(
            required: TokenAuthentication(authenticator: authenticator),
            ifPresented: TokenAuthentication(authenticator: authenticator, need: .ifPresented),
            limiter: limiter
        )
    }
}

/// The groups' rules for a request no route matched (`APIGroups.unknownRoutes`): the group whose
/// paths it is under decides, by the same rules as for its routes. Only here are paths compared
/// with the groups' prefixes: a route the router knows has its group's middlewares already.
struct UnknownRouteMiddleware: RouterMiddleware {
    let required: TokenAuthentication
    let ifPresented: TokenAuthentication
    let limiter: RateLimiter

    func handle(
        _ request: Request,
        context: ServerRequestContext,
        next: (Request, ServerRequestContext) async throws -> Response
    ) async throws -> Response {
        let path = request.uri.path
        let under = { (group: String) in path == "/v1/\(group)" || path.hasPrefix("/v1/\(group)/") }
        let limited = RateLimitMiddleware<ServerRequestContext>(limiter: limiter)
        if APIGroups.tokenPaths.contains(where: under) {
            return try await required.handle(request, context: context) { request, context in
                try await limited.handle(request, context: context, next: next)
            }
        }
        guard under(APIGroups.pairingPath) else { return try await next(request, context) }
        // As the pairing routes: a claim takes no token; reading takes one if the request has one;
        // anything else needs one. Without a token, the client address's limit applies below
        // `/v1/pairings/`.
        if path.hasSuffix("/claim") { return try await limited.handle(request, context: context, next: next) }
        let authentication = request.method == .get ? ifPresented : required
        return try await authentication.handle(request, context: context) { request, context in
            guard context.token != nil || path.hasPrefix("/v1/\(APIGroups.pairingPath)/") else { return try await next(request, context) }
            return try await limited.handle(request, context: context, next: next)
        }
    }
}
