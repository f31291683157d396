import Hummingbird
import Logging

/// The one place errors become answers: whatever a route or Hummingbird throws comes out as
/// `APIError`'s JSON body. A 5xx is logged; a 4xx is the client's business.
struct ErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            let response = try await next(request, context)
            return response
        } catch {
            let apiError = APIError.from(error)
            if apiError.status.code >= 500 {
                context.logger.error("\(request.method) \(request.uri.path): \(APIError.logDescription(of: error))")
            }
            return try apiError.response(from: request, context: context)
        }
    }
}
