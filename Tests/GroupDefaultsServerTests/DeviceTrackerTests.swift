import Foundation
import TestSupport
import Testing

@testable import GroupDefaultsServer

/// `DeviceTracker`'s writes after an account is deleted, and when the server stops.
@Suite("Device tracker")
struct DeviceTrackerTests {
    @Test("a sighting merged before its account was deleted is not written after: the device does not come back", arguments: StorageBackend.allCases)
    func deletedAccountStaysDeleted(backend: StorageBackend) async throws {
        try await backend.withStorage { storage in
            let made = Tokens.make(account: "alice", suitePatterns: ["*"], readOnly: false, device: "phone", expires: nil)
            try await storage.createToken(made.stored)
            let tracker = DeviceTracker(storage: storage, interval: .seconds(3600))  // flushed by hand below
            await tracker.seen(token: made.stored, deviceID: 7, suite: "s", push: false)  // written at once
            await tracker.seen(token: made.stored, deviceID: 7, suite: "s", push: true)  // merged, pending
            #expect(try await storage.devices(account: "alice").count == 1)
            #expect(try await storage.deleteAccount("alice"))
            await tracker.flush()
            #expect(try await storage.devices(account: "alice").isEmpty)
        }
    }

    @Test("the sightings not written yet are written when the server stops, and none are recorded after", arguments: StorageBackend.allCases)
    func closeWritesWhatIsPending(backend: StorageBackend) async throws {
        try await backend.withStorage { storage in
            let made = Tokens.make(account: "alice", suitePatterns: ["*"], readOnly: false, device: "phone", expires: nil)
            try await storage.createToken(made.stored)
            let tracker = DeviceTracker(storage: storage, interval: .seconds(3600))  // never flushed by its timer here
            await tracker.seen(token: made.stored, deviceID: 7, suite: "s", push: false)  // written at once
            await tracker.seen(token: made.stored, deviceID: 7, suite: "s", push: true)  // merged, pending
            #expect(try await storage.devices(account: "alice").first?.lastPush == nil)
            await tracker.close()
            #expect(try await storage.devices(account: "alice").first?.lastPush != nil)
            await tracker.seen(token: made.stored, deviceID: 8, suite: "s", push: false)  // after close: not written
            #expect(try await storage.devices(account: "alice").map(\.deviceID) == [7])
        }
    }
}
