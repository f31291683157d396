import GroupDefaultsWire
package import Hummingbird

/// The request context of the API: Hummingbird's, plus the bearer token `TokenMiddleware` checked.
package struct ServerRequestContext: RequestContext {
    package var coreContext: CoreRequestContextStorage
    /// The request's valid token (set for every `/v1/suites…` and `/v1/devices` request).
    package var token: StoredToken?
    /// The device the request names in its `Device-ID` header (checked with the token).
    package var deviceID: UInt64?
    /// The client's IP address, if the connection has one (the console's sign-in throttle keys on it).
    package var clientAddress: String?

    package init(source: Source) {
        self.coreContext = .init(source: source)
        self.token = nil
        self.deviceID = nil
        self.clientAddress = source.channel.remoteAddress?.ipAddress
    }
}

/// Every `/v1/suites…` and `/v1/devices` request, whatever its route or method, needs a valid bearer
/// token, checked before anything else about the request (so a bad request without one is 401);
/// then its `Device-ID` header, if any (400 unless a decimal device id).
struct TokenMiddleware: RouterMiddleware {
    let authenticator: Authenticator

    func handle(
        _ request: Request,
        context: ServerRequestContext,
        next: (Request, ServerRequestContext) async throws -> Response
    ) async throws -> Response {
        let path = request.uri.path
        // Every route but health, limits, metrics and a pairing's claim (whose pairing id is its
        // credential) takes a token; so does reading a pairing's state, except for the claiming
        // device, which reads it without one (its token works only once the keys are handed over).
        let pairing = path == "/v1/pairings" || (path.hasPrefix("/v1/pairings/") && !path.hasSuffix("/claim"))
        let pairingStateWithoutToken = pairing && request.method == .get && request.headers[.authorization] == nil
        guard path == "/v1/suites" || path.hasPrefix("/v1/suites/") || path == "/v1/devices" || path.hasPrefix("/v1/devices/") || pairing,
            !pairingStateWithoutToken
        else { return try await next(request, context) }
        var context = context
        context.token = try await authenticator.token(for: request)
        if let text = request.headers[.init(DeviceHeader.name)!] {
            context.deviceID = try Query.decimal(text, name: "the \(DeviceHeader.name) header")
        }
        return try await next(request, context)
    }
}
