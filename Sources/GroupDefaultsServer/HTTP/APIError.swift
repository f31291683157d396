public import GroupDefaults
public import Hummingbird

/// Every error answer of the API: a status, the JSON body (`SyncErrorBody`) and, where the code
/// asks for one, a header (`WWW-Authenticate`, `Retry-After`).
public struct APIError: HTTPResponseError, CustomStringConvertible {
    public var status: HTTPResponse.Status
    public var body: SyncErrorBody
    public var headers: HTTPFields

    public init(_ status: HTTPResponse.Status, _ code: String, _ detail: String, key: String? = nil, limit: Int? = nil,
                serverTime: String? = nil, headers: HTTPFields = [:]) {
        self.status = status
        self.body = SyncErrorBody(error: code, detail: detail, key: key, limit: limit, serverTime: serverTime)
        self.headers = headers
    }

    public var description: String { "\(status.code) \(body)" }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var response = try JSONBody.response(status: status, body)
        for field in headers { response.headers.append(field) }
        return response
    }

    static func malformed(_ detail: String) -> APIError { APIError(.badRequest, "malformed", detail) }
    static func unauthorized(_ detail: String) -> APIError {
        APIError(.unauthorized, "unauthorized", detail, headers: [.wwwAuthenticate: "Bearer"])
    }
    static func forbidden(_ detail: String) -> APIError { APIError(.forbidden, "forbidden", detail) }
    static func notFound(_ detail: String) -> APIError { APIError(.notFound, "not_found", detail) }
    static func invalidSuite(_ detail: String) -> APIError { APIError(.unprocessableContent, "invalid_suite", detail) }
    static func unavailable(_ detail: String) -> APIError {
        APIError(.serviceUnavailable, "unavailable", detail, headers: [.retryAfter: "1"])
    }

    /// The API's answer for any error: ours as is, storage's by code, Hummingbird's and the
    /// decoder's as the matching 4xx; anything else is `unavailable` (a 503, the server's trouble).
    static func from(_ error: any Error) -> APIError {
        switch error {
        case let error as APIError:
            return error
        case let error as SyncStorageError:
            switch error.code {
            case .idempotencyMismatch: return APIError(.unprocessableContent, error.code.rawValue, error.detail)
            case .quotaExceeded: return APIError(.unprocessableContent, error.code.rawValue, error.detail, limit: error.limit)
            case .cursorExpired: return APIError(.gone, error.code.rawValue, error.detail)
            case .notFound: return .notFound(error.detail)
            case .unavailable: return .unavailable(error.detail)
            }
        case is DecodingError:
            return .malformed("the body is not the JSON this route takes: \(describe(error as! DecodingError))")
        case let error as any HTTPResponseError:
            switch error.status {
            case .contentTooLarge: return APIError(.contentTooLarge, "body_too_large", "the request body is too large")
            case .notFound: return .notFound("no such route")
            case .methodNotAllowed: return APIError(.methodNotAllowed, "method_not_allowed", "this route does not take that method")
            case .unauthorized: return .unauthorized("a valid bearer token is needed")
            case let other where (400 ..< 500).contains(other.code):
                return APIError(other, "malformed", other.reasonPhrase)
            case let other:
                return .unavailable("the server could not answer: \(other.reasonPhrase)")
            }
        default:
            return .unavailable("the server could not answer: \(error)")
        }
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
