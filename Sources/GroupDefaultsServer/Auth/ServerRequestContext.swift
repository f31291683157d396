import GroupDefaultsWire
package import Hummingbird

/// The request context of the API: Hummingbird's, plus the bearer token `TokenAuthentication`
/// checked, for the routes that take one.
package struct ServerRequestContext: RequestContext {
    package var coreContext: CoreRequestContextStorage
    /// The request's valid token: set by `TokenAuthentication` (every route of the token group, and
    /// a pairing's state read with a token), nil elsewhere.
    package var token: StoredToken?
    /// The device the request names in its `Device-ID` header (checked with the token).
    package var deviceID: UInt64?
    /// The client's IP address, if the connection has one (the console's sign-in throttle and the
    /// pairing claims' rate limit key on it).
    package var clientAddress: String?
    /// The check of the account incarnation the request names: set by
    /// `AccountIncarnationMiddleware` on the token group's routes, nil elsewhere.
    package var accountIncarnation: AccountIncarnationCheck?
    /// Where an event stream is left for its connection to hold (`ConnectionDispatch`), nil when
    /// the request's task runs it.
    package var streamParking: StreamParking?

    package init(source: Source) {
        self.coreContext = .init(source: source)
        self.token = nil
        self.deviceID = nil
        self.clientAddress = source.channel.remoteAddress?.ipAddress
        self.accountIncarnation = nil
        self.streamParking = nil
    }
}

/// The context of a route of the token group (`APIRoutes`): `TokenAuthentication` has checked the
/// request's token, so there always is one.
package struct TokenRequestContext: ChildRequestContext {
    package var coreContext: CoreRequestContextStorage
    /// The request's valid token.
    package let token: StoredToken
    /// The device the request names in its `Device-ID` header.
    package let deviceID: UInt64?
    /// The client's IP address, if the connection has one.
    package let clientAddress: String?
    /// The check of the account incarnation the request names (`SuiteAccess.check` runs it).
    package let accountIncarnation: AccountIncarnationCheck?
    /// Where an event stream is left for its connection to hold, if the connection does.
    package let streamParking: StreamParking?

    /// The context of a request `TokenAuthentication` let through; 401 if it did not run (a route
    /// registered outside the token group's authentication).
    package init(context: ServerRequestContext) throws {
        guard let token = context.token else { throw APIError.unauthorized("a valid bearer token is needed") }
        self.coreContext = context.coreContext
        self.token = token
        self.deviceID = context.deviceID
        self.clientAddress = context.clientAddress
        self.accountIncarnation = context.accountIncarnation
        self.streamParking = context.streamParking
    }
}
