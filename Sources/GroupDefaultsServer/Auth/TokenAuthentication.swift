import GroupDefaultsWire
import Hummingbird

/// The authenticator of the token routes (`APIRoutes`): it checks the request's bearer token before
/// anything else about the request (so a bad request without one is 401), then its `Device-ID`
/// header, if any (400 unless a decimal device id), and puts both into the context.
struct TokenAuthentication: RouterMiddleware {
    /// Whether a request must have a token, or only one that has an `Authorization` header (a
    /// pairing's state, which the claiming device reads without one).
    enum Need {
        case required
        case ifPresented
    }

    let authenticator: Authenticator
    var need = Need.required

    func handle(
        _ request: Request,
        context: ServerRequestContext,
        next: (Request, ServerRequestContext) async throws -> Response
    ) async throws -> Response {
        if need == .ifPresented, request.headers[.authorization] == nil { return try await next(request, context) }
        var context = context
        context.token = try await authenticator.token(for: request)
        if let text = request.headers[.init(DeviceHeader.name)!] {
            context.deviceID = try Query.decimal(text, name: "the \(DeviceHeader.name) header")
        }
        return try await next(request, context)
    }
}
