import Foundation
import GroupDefaultsServer
import GroupDefaultsWire
import Hummingbird
import Testing

/// `openapi.yaml`, hand-written, must describe what the server does: the same paths with the same
/// methods, no more, no fewer.
@Suite("openapi.yaml matches the router")
struct OpenAPIDocumentTests {
    /// The repository's root, from this file's path (Tests/GroupDefaultsServerTests/…).
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// "METHOD /path/{param}" for every operation of the document: paths are the keys indented by two
    /// spaces under `paths:`, methods the keys indented by four under them.
    static func documentedOperations() throws -> Set<String> {
        let text = try String(contentsOf: root.appendingPathComponent("openapi.yaml"), encoding: .utf8)
        var operations = Set<String>()
        var inPaths = false
        var path: String?
        let methods: Set<String> = ["get", "put", "post", "delete", "patch", "head", "options"]
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if !line.hasPrefix(" ") && !line.isEmpty && !line.hasPrefix("#") {
                inPaths = line.hasPrefix("paths:")
                path = nil
                continue
            }
            guard inPaths else { continue }
            if line.hasPrefix("  /"), !line.hasPrefix("   "), let colon = line.lastIndex(of: ":") {
                path = String(line[line.index(line.startIndex, offsetBy: 2)..<colon]).trimmingCharacters(in: CharacterSet(charactersIn: "'\""))
            } else if let path, line.hasPrefix("    "), !line.hasPrefix("     "), let colon = line.firstIndex(of: ":") {
                let key = line.dropFirst(4)[..<colon]
                if methods.contains(String(key)) { operations.insert("\(key.uppercased()) \(path)") }
            }
        }
        return operations
    }

    @Test("every API route of the router is in the document, and every operation of the document is a route")
    func sameOperations() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("openapi-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let storage = try LMDBSyncStorage(directory: directory.path)
        let router = buildRouter(storage: storage, configuration: ServerConfiguration(storage: .embedded(directory: directory.path)))
        // Hummingbird writes parameters as {name}, as OpenAPI does. The console's pages (`/console`)
        // are not part of the API.
        let routed = Set(
            router.routes.filter { !$0.path.description.hasPrefix("/console") }
                .map { "\($0.method.rawValue) \($0.path.description)" }
        )
        let documented = try Self.documentedOperations()
        #expect(!documented.isEmpty, "no operations read from openapi.yaml")
        #expect(routed.subtracting(documented).isEmpty, "routes missing from openapi.yaml: \(routed.subtracting(documented).sorted())")
        #expect(documented.subtracting(routed).isEmpty, "documented but not routed: \(documented.subtracting(routed).sorted())")
        try await storage.shutdown()
    }
}

@Suite("openapi.yaml lists the error codes")
struct OpenAPIErrorCodeTests {
    /// The `enum:` items of `ErrorBody.error` in the document.
    static func documentedCodes() throws -> [String] {
        let text = try String(contentsOf: OpenAPIDocumentTests.root.appendingPathComponent("openapi.yaml"), encoding: .utf8)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard let body = lines.firstIndex(where: { $0 == "    ErrorBody:" }),
            let error = lines[body...].firstIndex(where: { $0 == "        error:" }),
            let list = lines[error...].firstIndex(where: { $0 == "          enum:" })
        else { return [] }
        return lines[(list + 1)...].prefix { $0.hasPrefix("            - ") }.map { String($0.dropFirst(14)) }
    }

    @Test("SyncErrorCode.allKnown is exactly the codes the document lists, in its order")
    func sameCodes() throws {
        let documented = try Self.documentedCodes()
        #expect(!documented.isEmpty, "no error codes read from openapi.yaml")
        #expect(SyncErrorCode.allKnown.map(\.rawValue) == documented)
    }
}
