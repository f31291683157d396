// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "GroupDefaults",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "GroupDefaults", targets: ["GroupDefaults"]),
        .executable(name: "groupdefaults", targets: ["groupdefaults"]),
        .executable(name: "groupdefaults-bench", targets: ["groupdefaults-bench"]),
        .executable(name: "demo-host-app", targets: ["demo-host-app"]),
        .executable(name: "demo-notification-service", targets: ["demo-notification-service"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
    ],
    targets: [
        .systemLibrary(
            name: "CLMDB",
            pkgConfig: "lmdb",
            providers: [.apt(["liblmdb-dev"]), .brew(["lmdb"])]
        ),
        .target(
            name: "GroupDefaults",
            dependencies: [
                "CLMDB",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // The command-line tool for suites: the verbs of macOS `defaults`, plus watch, JSON, backup, verify.
        .executableTarget(
            name: "groupdefaults",
            dependencies: [
                "GroupDefaults",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .testTarget(
            name: "groupdefaultsTests",
            dependencies: ["GroupDefaults", "groupdefaults"]
        ),

        // Benchmark: the store beside raw LMDB (C) and Foundation's UserDefaults, in one run.
        .target(name: "CLMDBReference", dependencies: ["CLMDB"]),
        .executableTarget(
            name: "groupdefaults-bench",
            dependencies: ["GroupDefaults", "CLMDBReference"]
        ),

        // The seed scenario as two real processes: the host app chooses a sound, the notification
        // service puts it in a push payload. `DemoSupport` holds the sound checks both make.
        .target(
            name: "DemoSupport",
            dependencies: ["GroupDefaults", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        .executableTarget(
            name: "demo-host-app",
            dependencies: [
                "GroupDefaults", "DemoSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "demo-notification-service",
            dependencies: [
                "GroupDefaults", "DemoSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .testTarget(
            name: "DemoTests",
            dependencies: ["GroupDefaults", "demo-host-app", "demo-notification-service"]
        ),

        // A small executable the tests spawn as separate processes.
        .executableTarget(
            name: "GroupDefaultsTestHelper",
            dependencies: ["GroupDefaults"],
            path: "Tests/GroupDefaultsTestHelper"
        ),
        .testTarget(
            name: "GroupDefaultsTests",
            dependencies: [
                "GroupDefaults",
                .product(name: "PropertyBased", package: "swift-property-based"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
