import Foundation
import GroupDefaultsServer
import GroupDefaultsWire
import TestSupport
import Testing

/// The account export's `devices` are as `GET /v1/devices` lists them (docs/account-export.md):
/// the `unverified` mark included, `current` false (no device asked).
@Suite("The account export's devices")
struct AccountExportDevicesTests {
    @Test("a device claiming another's id is exported as unverified, as GET /v1/devices lists it", arguments: StorageBackend.allCases)
    func exportMarksUnverifiedDevices(backend: StorageBackend) async throws {
        try await backend.withStorage { storage in
            var tokens: [String] = []
            for _ in 0..<2 {
                let made = Tokens.make(account: "ana", suitePatterns: ["*"], readOnly: false, device: nil, expires: nil)
                try await storage.createToken(made.stored)
                tokens.append(made.stored.id)
            }
            // The phone's token saw device 42 first; another token of ana's then named the same id.
            let now = HLC.wallClockMilliseconds()
            for (index, token) in tokens.enumerated() {
                let seen = now + UInt64(index) * 1000
                try await storage.recordDevice(
                    StoredDevice(
                        account: "ana",
                        tokenID: token,
                        name: nil,
                        deviceID: 42,
                        firstSeen: seen,
                        lastSeen: seen,
                        lastPush: nil,
                        suites: ["notes"]
                    )
                )
            }
            let export = try await AccountExport.read(account: "ana", from: storage)
            let json = try JSONSerialization.jsonObject(with: try JSONEncoder().encode(export)) as? [String: Any]
            let devices = try #require(json?["devices"] as? [[String: Any]], "\(String(describing: json))")
            #expect(devices.count == 2, "\(devices)")
            let marked = devices.filter { $0["unverified"] as? Bool == true }.compactMap { $0["token_id"] as? String }
            #expect(marked == [tokens[1]], "the later token's record, alone: \(devices)")
            #expect(devices.allSatisfy { $0["current"] as? Bool == false }, "\(devices)")
            #expect(devices.allSatisfy { $0["unverified"] == nil || $0["unverified"] as? Bool == true }, "absent unless marked: \(devices)")
        }
    }
}
