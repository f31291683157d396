import Foundation
import GroupDefaultsServer
import TestSupport
import Testing

extension StorageConformanceTests {
    /// `StorageIncarnation` (the identity of the storage's history), over every backend.
    @Suite("StorageIncarnation")
    struct StorageIncarnationConformance: StorageConformance {
        @Test("the incarnation is made once and kept; renewing it gives a new one, kept from then on", arguments: StorageBackend.allCases)
        func incarnation(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                let first = try await storage.incarnation()
                #expect(first.count == 32 && first.allSatisfy(\.isHexDigit))
                #expect(try await storage.incarnation() == first)
                let renewed = try await storage.renewIncarnation()
                #expect(renewed != first)
                #expect(try await storage.incarnation() == renewed)
            }
        }
    }
}
