// swift-tools-version:6.1
import PackageDescription

// Every Swift target builds in Swift 6 language mode with these upcoming features:
// `InternalImportsByDefault` makes `import CLevelDB` internal, so the compiler rejects any public
// signature that would leak a LevelDB type.
let settings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "Satchel",
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .library(name: "Satchel", targets: ["Satchel"]),
        .library(name: "SatchelSync", targets: ["SatchelSync"]),
        .library(name: "SatchelRhoConnect", targets: ["SatchelRhoConnect"]),
        .library(name: "SatchelKinto", targets: ["SatchelKinto"]),
        .library(name: "SatchelParse", targets: ["SatchelParse"]),
        .library(name: "SatchelSalesforce", targets: ["SatchelSalesforce"]),
        // For adapter authors' tests: the conformance kit and fault injection.
        .library(name: "SatchelSyncTesting", targets: ["SatchelSyncTesting"]),
        .executable(name: "satchel", targets: ["SatchelCLI"]),
        .executable(name: "satchel-bench", targets: ["SatchelBench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        // The store and the sync engine log through swift-log (a no-op logger unless the app
        // passes its own).
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.0"),
        // The RhoConnect adapter unzips bulk-data files.
        .package(url: "https://github.com/weichsel/ZIPFoundation.git", from: "0.9.20"),
        // Tests only: the loopback RhoConnect server's HTTP server, and its multipart parser.
        .package(url: "https://github.com/swhitty/FlyingFox.git", from: "0.27.1"),
        .package(url: "https://github.com/vapor/multipart-kit.git", from: "4.7.1"),
    ],
    targets: [
        // Layer 0: the C seam. A module map and a header, no Swift.
        .systemLibrary(
            name: "CLevelDB",
            providers: [.apt(["libleveldb-dev", "libsnappy-dev", "libssl-dev"]), .brew(["leveldb", "openssl"])]
        ),
        // Layer 0 too: encryption at rest below LevelDB, a small C++ target over Debian's
        // libleveldb headers (an Env subclass reaching the C API's options) and OpenSSL's libcrypto
        // (AES-256-CTR for files, AES-256-GCM for the key file, scrypt), with a C interface.
        .target(name: "CLevelDBEncryption", dependencies: ["CLevelDB"], linkerSettings: [.linkedLibrary("crypto")]),
        // Layer 1: the core store. Only files under Sources/Satchel/Storage import CLevelDB and
        // CLevelDBEncryption.
        .target(
            name: "Satchel", dependencies: ["CLevelDB", "CLevelDBEncryption", .product(name: "Logging", package: "swift-log")],
            swiftSettings: settings),
        // Layer 2: the sync engine and the backend adapter protocol, with the in-memory backend.
        .target(name: "SatchelSync", dependencies: ["Satchel", .product(name: "Logging", package: "swift-log")], swiftSettings: settings),
        // Debian's SQLite: RhoConnect's bulk-data files are zipped SQLite databases, and the
        // benchmark's baselines are SQLite.
        .systemLibrary(name: "CSQLite", providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]),
        // Layer 3: adapters. Each speaks one server's protocol and depends on the engine only
        // (and what its wire format needs).
        .target(
            name: "SatchelRhoConnect",
            dependencies: ["Satchel", "SatchelSync", "CSQLite", .product(name: "ZIPFoundation", package: "ZIPFoundation")],
            swiftSettings: settings
        ),
        .target(name: "SatchelKinto", dependencies: ["Satchel", "SatchelSync"], swiftSettings: settings),
        .target(name: "SatchelParse", dependencies: ["Satchel", "SatchelSync"], swiftSettings: settings),
        .target(name: "SatchelSalesforce", dependencies: ["Satchel", "SatchelSync"], swiftSettings: settings),
        // Top layer: the command-line tool.
        .executableTarget(
            name: "SatchelCLI",
            dependencies: [
                "Satchel", "SatchelSync", "SatchelRhoConnect", "SatchelKinto", "SatchelParse", "SatchelSalesforce",
                .product(name: "ArgumentParser", package: "swift-argument-parser"), .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: settings
        ),
        // The benchmark: Satchel against baselines run in the same process. It reaches LevelDB's C
        // API directly for the raw baseline, and SQLite's for two more.
        .executableTarget(
            name: "SatchelBench",
            dependencies: [
                "Satchel", "SatchelSync", "SatchelKinto", "SatchelParse", "SatchelSalesforce", "CLevelDB", "CSQLite",
                // The parse and salesforce groups start the tests' loopback servers in process; the
                // data comes from the tests' deterministic generator.
                "ParseTestServer", "SalesforceTestServer", "SatchelTestSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: settings
        ),
        // Tests only: what Swift's Glibc module does not show of posix_spawn.
        .target(name: "CSpawn", path: "Tests/CSpawn"),
        // Tests only: temporary stores, fixtures, child processes, a deterministic generator.
        .target(
            name: "SatchelTestSupport",
            dependencies: ["Satchel", "CSpawn"],
            path: "Tests/SatchelTestSupport",
            swiftSettings: settings
        ),
        .testTarget(
            name: "SatchelTests",
            dependencies: [
                "Satchel", "SatchelTestSupport",
                .product(name: "PropertyBased", package: "swift-property-based"), .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: settings
        ),
        .testTarget(
            name: "SatchelCLITests",
            dependencies: [
                "Satchel", "SatchelSync", "SatchelTestSupport", "SatchelCLI", "RhoConnectTestServer", "ParseTestServer", "SalesforceTestServer",
                "LoopbackSupport",
            ],
            swiftSettings: settings
        ),
        // For tests of adapters (ours and others'): the conformance kit every adapter must pass,
        // and fault injection at the adapter's boundary. Uses Swift Testing.
        .target(
            name: "SatchelSyncTesting", dependencies: ["Satchel", "SatchelSync", .product(name: "Logging", package: "swift-log")],
            swiftSettings: settings),
        .testTarget(
            name: "SatchelSyncTests",
            dependencies: ["Satchel", "SatchelSync", "SatchelTestSupport", "SatchelSyncTesting", "LoopbackSupport"],
            swiftSettings: settings
        ),
        // A RhoConnect server on loopback, driven by Fixtures/rhoconnect: written from the
        // protocol, sharing no code with the adapter it tests.
        .target(
            name: "RhoConnectTestServer",
            dependencies: [
                "CSQLite", "LoopbackSupport",
                .product(name: "FlyingFox", package: "FlyingFox"),
                .product(name: "FlyingSocks", package: "FlyingFox"),
                .product(name: "MultipartKit", package: "multipart-kit"),
                .product(name: "ZIPFoundation", package: "ZIPFoundation"),
            ],
            path: "Tests/RhoConnectTestServer",
            swiftSettings: settings
        ),
        .testTarget(
            name: "SatchelKintoTests",
            dependencies: [
                "Satchel", "SatchelSync", "SatchelKinto", "SatchelTestSupport", "SatchelSyncTesting", "LoopbackSupport",
                .product(name: "FlyingFox", package: "FlyingFox"), .product(name: "FlyingSocks", package: "FlyingFox"),
            ],
            swiftSettings: settings
        ),
        // What the loopback test servers share: starting on a free port and routing requests to
        // the server, the request log's entries, reading and writing JSON text.
        .target(
            name: "LoopbackSupport",
            dependencies: [.product(name: "FlyingFox", package: "FlyingFox"), .product(name: "FlyingSocks", package: "FlyingFox")],
            path: "Tests/LoopbackSupport",
            swiftSettings: settings
        ),
        // A Parse Server on loopback, driven by Fixtures/parse: written from Parse's REST API,
        // sharing no code with the adapter it tests.
        .target(
            name: "ParseTestServer",
            dependencies: [
                "LoopbackSupport", .product(name: "FlyingFox", package: "FlyingFox"), .product(name: "FlyingSocks", package: "FlyingFox"),
            ],
            path: "Tests/ParseTestServer",
            swiftSettings: settings
        ),
        .testTarget(
            name: "SatchelParseTests",
            dependencies: [
                "Satchel", "SatchelSync", "SatchelParse", "SatchelTestSupport", "SatchelSyncTesting", "ParseTestServer", "LoopbackSupport",
            ],
            swiftSettings: settings
        ),
        // A Salesforce org on loopback, driven by Fixtures/salesforce: written from Salesforce's
        // REST API, sharing no code with the adapter it tests.
        .target(
            name: "SalesforceTestServer",
            dependencies: [
                "LoopbackSupport", .product(name: "FlyingFox", package: "FlyingFox"), .product(name: "FlyingSocks", package: "FlyingFox"),
            ],
            path: "Tests/SalesforceTestServer",
            swiftSettings: settings
        ),
        .testTarget(
            name: "SatchelSalesforceTests",
            dependencies: [
                "Satchel", "SatchelSync", "SatchelSalesforce", "SatchelTestSupport", "SatchelSyncTesting", "SalesforceTestServer", "LoopbackSupport",
            ],
            swiftSettings: settings
        ),
        // Fuzzing (scripts/fuzz.sh): the libFuzzer targets for every parser of bytes Satchel does
        // not control, a driver that runs them under libFuzzer (built with -DSATCHEL_FUZZING) or
        // replays files through them, and tests that replay the seed corpora and every finding.
        .target(
            name: "SatchelFuzzTargets",
            dependencies: ["Satchel", "SatchelSync", "SatchelRhoConnect", "SatchelKinto", "SatchelParse", "SatchelSalesforce"],
            path: "Tests/Fuzz/Targets",
            swiftSettings: settings
        ),
        .executableTarget(name: "SatchelFuzz", dependencies: ["SatchelFuzzTargets"], path: "Tests/Fuzz/Driver", swiftSettings: settings),
        .testTarget(
            name: "SatchelFuzzReplayTests",
            dependencies: ["SatchelFuzzTargets", "Satchel", "SatchelSync"],
            path: "Tests/SatchelFuzzReplayTests",
            swiftSettings: settings
        ),
        // The README's Swift tours, extracted at build time and run as written.
        .executableTarget(name: "ReadmeTourGenerator", path: "Tests/ReadmeTourGenerator", swiftSettings: settings),
        .plugin(name: "ReadmeTour", capability: .buildTool(), dependencies: ["ReadmeTourGenerator"], path: "Plugins/ReadmeTour"),
        .testTarget(
            name: "ReadmeTests",
            dependencies: ["Satchel", "SatchelSync", "SatchelTestSupport"],
            swiftSettings: settings,
            plugins: ["ReadmeTour"]
        ),
        .testTarget(
            name: "SatchelRhoConnectTests",
            dependencies: [
                "Satchel", "SatchelSync", "SatchelRhoConnect", "SatchelTestSupport", "SatchelSyncTesting", "RhoConnectTestServer",
            ],
            swiftSettings: settings
        ),
        // The crash campaign (scripts/crash-campaign.sh): kills the satchel executable at random
        // moments of an import, a transaction writer, a pull, a push, an index build, a backup
        // and a migration, and checks the store after each kill (a migration's, underneath
        // Satchel with LevelDB's C API, before an open finishes it); then damages stores and
        // checks their repair.
        .executableTarget(
            name: "CrashCampaign",
            dependencies: ["Satchel", "SatchelSync", "SatchelTestSupport", "RhoConnectTestServer", "CLevelDB"],
            path: "Tests/CrashCampaign",
            swiftSettings: settings
        ),
    ],
    swiftLanguageModes: [.v6],
    cxxLanguageStandard: .cxx17
)
