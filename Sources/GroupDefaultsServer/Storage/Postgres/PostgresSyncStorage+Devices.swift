import Foundation
import GroupDefaultsWire
import Logging
import PostgresNIO

// Devices: one record per (token, device id), sightings merged into it.
extension PostgresSyncStorage: DeviceStore {
    package func recordDevice(_ sighting: StoredDevice) async throws {
        let lastPush = sighting.lastPush.map(Self.date)
        try await bounded("recording a device") { storage in
            // The merge rule of `StoredDevice.merged(with:)`, in SQL (GREATEST and LEAST skip NULLs).
            // A sighting flushed after its account was deleted (or made again) is not written: its
            // device would be listed with a token that is gone, and could not be revoked. The token's
            // row is locked as a push locks it: a deletion under way (tokens first) is waited for.
            try await storage.client.query(
                """
                INSERT INTO devices (id, account, token_id, name, device_id, first_seen, last_seen, last_push, suites)
                SELECT \(sighting.id), \(sighting.account), \(sighting.tokenID), \(sighting.name),
                        \(String(sighting.deviceID))::numeric, \(Self.date(sighting.firstSeen)), \(Self.date(sighting.lastSeen)),
                        \(lastPush), \(sighting.suites)::text[]
                WHERE EXISTS (SELECT 1 FROM tokens WHERE id = \(sighting.tokenID) AND account = \(sighting.account) FOR KEY SHARE)
                ON CONFLICT (account, token_id, device_id) DO UPDATE SET
                    name = COALESCE(excluded.name, devices.name),
                    first_seen = LEAST(devices.first_seen, excluded.first_seen),
                    last_seen = GREATEST(devices.last_seen, excluded.last_seen),
                    last_push = GREATEST(devices.last_push, excluded.last_push),
                    suites = ARRAY(SELECT DISTINCT s FROM unnest(devices.suites || excluded.suites) AS s ORDER BY s)
                """,
                logger: storage.logger
            )
        }
    }

    package func devices(account: String?) async throws -> [StoredDevice] {
        try await bounded("listing devices") { storage in
            let rows = try await storage.client.query(
                """
                SELECT account, token_id, name, device_id::text, (extract(epoch FROM first_seen) * 1000)::bigint,
                       (extract(epoch FROM last_seen) * 1000)::bigint, (extract(epoch FROM last_push) * 1000)::bigint, suites
                FROM devices WHERE \(account)::text IS NULL OR account = \(account)
                ORDER BY last_seen DESC, id DESC
                """,
                logger: storage.logger
            )
            var devices: [StoredDevice] = []
            for try await (account, tokenID, name, deviceID, firstSeen, lastSeen, lastPush, suites)
                in rows.decode((String, String, String?, String, Int64, Int64, Int64?, [String]).self)
            {
                guard let deviceID = UInt64(deviceID) else {
                    throw SyncStorageError(.unavailable, "a device record has an unreadable device id (\(deviceID))")
                }
                devices.append(
                    StoredDevice(
                        account: account,
                        tokenID: tokenID,
                        name: name,
                        deviceID: deviceID,
                        firstSeen: UInt64(max(0, firstSeen)),
                        lastSeen: UInt64(max(0, lastSeen)),
                        lastPush: lastPush.map { UInt64(max(0, $0)) },
                        suites: suites
                    )
                )
            }
            return devices
        }
    }

    private static func date(_ milliseconds: UInt64) -> Date {
        Date(timeIntervalSince1970: Double(milliseconds) / 1000)
    }
}
