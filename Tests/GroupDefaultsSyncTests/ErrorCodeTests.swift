import GroupDefaults
import GroupDefaultsSync
import GroupDefaultsWire
import Testing

/// A refusal means one thing to the client, however it arrives: as the answer to a request, or as
/// an event that ends the change stream.
@Suite("Error codes")
struct ErrorCodeTests {
    @Test("every code is classified alike in an answer (with its status) and in a stream event (without one)")
    func oneClassification() {
        for code in SyncErrorCode.allKnown {
            let answer = SyncError.answer(status: code.status, body: SyncErrorBody(error: code, detail: "d"), retryAfter: nil)
            let event = SyncError(refusal: code, status: nil, "d")
            #expect(answer.kind == event.kind, "\(code)")
            #expect(answer.code == code && event.code == code)
        }
    }

    @Test("what each kind of refusal makes the engine do")
    func kinds() {
        func kind(_ code: SyncErrorCode) -> SyncError.Kind { SyncError(refusal: code, status: nil, "d").kind }
        #expect(kind(.unauthorized) == .authenticationNeeded && kind(.forbidden) == .authenticationNeeded)
        #expect(kind(.unavailable) == .unavailable && kind(.rateLimited) == .unavailable && kind(.tooManyStreams) == .unavailable)
        #expect(
            [
                SyncErrorCode.cursorExpired, .valueTooLarge, .keyTooLong, .quotaExceeded, .batchTooLarge, .bodyTooLarge,
                .idempotencyMismatch, .clockSkew, .invalidSuite,
            ].allSatisfy { kind($0) == .rejected }
        )
        #expect(kind(.malformed) == .protocolError && kind(.notFound) == .protocolError)
        // A code this client does not know is judged by its status; a 410 without a body expired the cursor.
        #expect(
            SyncError.answer(
                status: 503,
                body: SyncErrorBody(error: SyncErrorCode(rawValue: "new_code"), detail: "d"),
                retryAfter: nil
            ).kind == .unavailable
        )
        #expect(SyncError.answer(status: 410, body: nil, retryAfter: nil).code == .cursorExpired)
        // `catch SyncErrorCode.x` matches the client's errors and the wire's.
        #expect(SyncErrorCode.quotaExceeded ~= SyncError(refusal: .quotaExceeded, status: 422, "d"))
        #expect(!(SyncErrorCode.quotaExceeded ~= SyncError(refusal: .keyTooLong, status: 422, "d")))
    }
}
