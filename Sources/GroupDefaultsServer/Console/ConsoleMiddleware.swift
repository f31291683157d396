import Foundation
import GroupDefaultsWire
import Hummingbird
import Logging

/// A console failure shown as a page: its status and a sentence for the operator.
struct ConsoleError: Error {
    var status: HTTPResponse.Status
    var message: String

    init(_ status: HTTPResponse.Status, _ message: String) {
        self.status = status
        self.message = message
    }

    static let crossSite = ConsoleError(
        .forbidden,
        "The form has expired or did not come from this console: reload the page and try again."
    )
}

/// A page that answers with a redirect (303 See Other: the browser follows with a GET).
struct ConsoleRedirect: Error {
    var location: String

    var response: Response {
        Response(status: .seeOther, headers: [.location: location])
    }
}

/// Every `/console` answer goes through here:
/// - a POST from another origin is refused before anything else (`Origin`, else `Sec-Fetch-Site`);
///   the form's own token is checked by the route (`ConsoleRoutes.checkForm`);
/// - a `ConsoleRedirect` becomes a 303, any other error a page with its status (storage trouble:
///   503; our own failures: logged, 500);
/// - every answer carries the security headers: a Content-Security-Policy allowing only this
///   origin's scripts, styles and connections and no framing, `X-Content-Type-Options: nosniff`,
///   referrers for this origin only, and no caching (except the assets).
struct ConsoleMiddleware: RouterMiddleware {
    typealias Context = ServerRequestContext

    static let contentSecurityPolicy =
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        + "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

    func handle(
        _ request: Request,
        context: ServerRequestContext,
        next: (Request, ServerRequestContext) async throws -> Response
    ) async throws -> Response {
        var response: Response
        if request.method == .post, !Self.isSameOrigin(request) {
            response = Self.errorPage(ConsoleError.crossSite)
        } else {
            do {
                response = try await next(request, context)
            } catch let redirect as ConsoleRedirect {
                response = redirect.response
            } catch let error as ConsoleError {
                response = Self.errorPage(error)
            } catch let error as SyncStorageError where error.code == .unavailable {
                // The detail (a database's own message) goes to the log, not to the page.
                context.logger.error("console \(request.method) \(request.uri.path): \(error)")
                response = Self.errorPage(ConsoleError(.serviceUnavailable, "The storage is unavailable. Try again shortly."))
                response.headers[.retryAfter] = "5"
            } catch let error as SyncStorageError {
                response = Self.errorPage(ConsoleError(.badRequest, error.detail))
            } catch let error as HTTPError {
                response = Self.errorPage(ConsoleError(error.status, error.body ?? error.status.reasonPhrase))
            } catch {
                context.logger.error("console \(request.method) \(request.uri.path): \(error)")
                response = Self.errorPage(ConsoleError(.internalServerError, "Something went wrong on the server; it is in the server's log."))
            }
        }
        response.headers[.contentSecurityPolicy] = Self.contentSecurityPolicy
        response.headers[.xContentTypeOptions] = "nosniff"
        response.headers[.init("X-Frame-Options")!] = "DENY"
        response.headers[.init("Referrer-Policy")!] = "same-origin"  // not no-referrer: with it, Chromium posts forms with `Origin: null`
        if response.headers[.cacheControl] == nil { response.headers[.cacheControl] = "no-store" }
        return response
    }

    /// Whether a POST comes from a page of this origin: its `Origin` is this host's (http or
    /// https); without `Origin`, `Sec-Fetch-Site` is `same-origin` or absent (a client that is not
    /// a browser, which has no cookie to abuse and still needs the form's token).
    static func isSameOrigin(_ request: Request) -> Bool {
        let host = request.head.authority
        if let origin = request.headers[.origin] {
            guard let host, origin != "null" else { return false }
            return origin == "http://" + host || origin == "https://" + host
        }
        if let site = request.headers[.init("Sec-Fetch-Site")!] { return site == "same-origin" }
        return true
    }

    static func errorPage(_ error: ConsoleError) -> Response {
        let page = ErrorPage(
            page: PageChrome(title: error.status.reasonPhrase, operatorName: nil, csrf: ""),
            status: error.status.code,
            message: error.message
        )
        return ConsolePage.html(ConsoleTemplates.render(page, "error"), status: error.status)
    }
}

/// Building the console's HTML responses.
enum ConsolePage {
    static func html(_ text: String, status: HTTPResponse.Status = .ok) -> Response {
        Response(
            status: status,
            headers: [.contentType: "text/html; charset=utf-8"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: text))
        )
    }
}
