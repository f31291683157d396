package import GroupDefaultsWire
package import Hummingbird

/// Every error answer of the API: a status, the JSON body (`SyncErrorBody`) and, where the code
/// asks for one, a header (`WWW-Authenticate`, `Retry-After`).
package struct APIError: HTTPResponseError, CustomStringConvertible {
    package var status: HTTPResponse.Status
    package var body: SyncErrorBody
    package var headers: HTTPFields

    /// An error answer with the code's own status (`SyncErrorCode.status`) unless `status` says
    /// otherwise, and the headers the code asks for: `WWW-Authenticate` for `unauthorized`,
    /// `Retry-After` (one second unless given) for `unavailable` and `rate_limited`, ten for
    /// `too_many_streams` (a stream ends later than a rate limit refills).
    package init(
        _ code: SyncErrorCode,
        _ detail: String,
        key: String? = nil,
        limit: Int? = nil,
        serverTime: String? = nil,
        status: HTTPResponse.Status? = nil,
        headers: HTTPFields = [:]
    ) {
        self.status = status ?? HTTPResponse.Status(code: code.status)
        self.body = SyncErrorBody(error: code, detail: detail, key: key, limit: limit, serverTime: serverTime)
        self.headers = headers
        switch code {
        case .unauthorized where self.headers[.wwwAuthenticate] == nil:
            self.headers[.wwwAuthenticate] = "Bearer"
        case .unavailable, .rateLimited:
            if self.headers[.retryAfter] == nil { self.headers[.retryAfter] = "1" }
        case .tooManyStreams:
            if self.headers[.retryAfter] == nil { self.headers[.retryAfter] = "10" }
        default:
            break
        }
    }

    package var description: String { "\(status.code) \(body)" }

    package func response(from request: Request, context: some RequestContext) throws -> Response {
        var response = try JSONBody.response(status: status, body)
        for field in headers { response.headers.append(field) }
        return response
    }

    static func malformed(_ detail: String) -> APIError { APIError(.malformed, detail) }
    static func unauthorized(_ detail: String) -> APIError { APIError(.unauthorized, detail) }
    static func forbidden(_ detail: String) -> APIError { APIError(.forbidden, detail) }
    static func notFound(_ detail: String) -> APIError { APIError(.notFound, detail) }
    static func invalidSuite(_ detail: String) -> APIError { APIError(.invalidSuite, detail) }
    static func unavailable(_ detail: String) -> APIError { APIError(.unavailable, detail) }

    /// The API's answer for any error: ours as is, storage's by code, Hummingbird's and the
    /// decoder's as the matching 4xx; anything else is `unavailable` (a 503, the server's trouble).
    static func from(_ error: any Error) -> APIError {
        switch error {
        case let error as APIError:
            return error
        case let error as SyncStorageError where error.code == .unavailable:
            return .unavailable(unavailableDetail)
        case let error as SyncStorageError:
            return APIError(error.code, error.detail, limit: error.limit)
        case is DecodingError:
            return .malformed("the body is not the JSON this route takes: \(describe(error as! DecodingError))")
        case let error as any HTTPResponseError:
            switch error.status {
            case .contentTooLarge: return APIError(.bodyTooLarge, "the request body is too large")
            case .notFound: return .notFound("no such route")
            case .methodNotAllowed: return APIError(.methodNotAllowed, "this route does not take that method")
            case .unauthorized: return .unauthorized("a valid bearer token is needed")
            case let other where (400..<500).contains(other.code):
                return APIError(.malformed, other.reasonPhrase, status: other)
            case let other:
                return .unavailable("the server could not answer: \(other.reasonPhrase)")
            }
        default:
            return .unavailable(unavailableDetail)
        }
    }

    /// The detail of every 503 that storage or an unexpected error caused: the same words whatever
    /// went wrong, because what went wrong (a database's message, a stored value that does not
    /// decode) is the server's business and may quote stored data. `ErrorMiddleware` logs it.
    static let unavailableDetail = "the server could not answer; try again later"

    /// What the server's log says of an error behind a 5xx: its type and the start of its
    /// description, bounded so that one failure cannot flood the log.
    static func logDescription(of error: any Error) -> String {
        let text = String(describing: error)
        let bounded = text.count > 300 ? text.prefix(300) + "…" : Substring(text)
        return "\(type(of: error)): \(bounded)"
    }

    private static func describe(_ error: DecodingError) -> String {
        switch error {
        case .dataCorrupted(let context), .keyNotFound(_, let context), .typeMismatch(_, let context), .valueNotFound(_, let context):
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            return path.isEmpty ? context.debugDescription : "\(path): \(context.debugDescription)"
        @unknown default:
            return "\(error)"
        }
    }
}
