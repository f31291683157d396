import Foundation
import GroupDefaultsWire
import Logging
import PostgresNIO

// Devices: one record per (token, device id), sightings merged into it.
extension PostgresSyncStorage: DeviceStore {
    package func recordDevices(_ sightings: [StoredDevice]) async throws {
        guard !sightings.isEmpty else { return }
        // Every sighting in one statement, as rows of one JSON array (names keep their bytes).
        let rows = String(decoding: try JSONEncoder().encode(sightings.map(SightingRow.init)), as: UTF8.self)
        try await bounded("recording devices") { storage in
            // The merge rule of `StoredDevice.merged(with:)`, in SQL (GREATEST and LEAST skip NULLs).
            // A sighting flushed after its account was deleted (or made again) is not written: its
            // device would be listed with a token that is gone, and could not be revoked. The token's
            // row is locked as a push locks it: a deletion under way (tokens first) is waited for.
            try await storage.client.query(
                """
                INSERT INTO devices (id, account, token_id, name, device_id, first_seen, last_seen, last_push, suites)
                SELECT s.id, s.account, s.token_id, s.name, s.device_id::numeric, to_timestamp(s.first_seen / 1000.0),
                        to_timestamp(s.last_seen / 1000.0), to_timestamp(s.last_push / 1000.0),
                        ARRAY(SELECT json_array_elements_text(s.suites))
                FROM json_to_recordset(\(rows)::json) AS s(id text, account text, token_id text, name text, device_id text,
                        first_seen bigint, last_seen bigint, last_push bigint, suites json)
                WHERE EXISTS (SELECT 1 FROM tokens WHERE id = s.token_id AND account = s.account FOR KEY SHARE)
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
}

/// A sighting as a row of `recordDevices`'s JSON (`json_to_recordset`): times in milliseconds, the
/// device id as text (a `UInt64` can pass `bigint`'s range).
private struct SightingRow: Encodable {
    let id: String
    let account: String
    let tokenID: String
    let name: String?
    let deviceID: String
    let firstSeen: UInt64
    let lastSeen: UInt64
    let lastPush: UInt64?
    let suites: [String]

    init(_ sighting: StoredDevice) {
        id = sighting.id
        account = sighting.account
        tokenID = sighting.tokenID
        name = sighting.name
        deviceID = String(sighting.deviceID)
        firstSeen = sighting.firstSeen
        lastSeen = sighting.lastSeen
        lastPush = sighting.lastPush
        suites = sighting.suites
    }

    enum CodingKeys: String, CodingKey {
        case id, account, name, suites
        case tokenID = "token_id"
        case deviceID = "device_id"
        case firstSeen = "first_seen"
        case lastSeen = "last_seen"
        case lastPush = "last_push"
    }
}
