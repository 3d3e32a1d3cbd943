//! Kafka's own Java client, for the interoperability tests: `InteropClient.java` beside this
//! file, compiled with `javac` against the `kafka-clients` jar of a release `scripts/kafka` has
//! fetched (the broker's own jars, so no extra download), and run as a [`Process`].

use super::process::Process;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

const SOURCE: &str = include_str!("InteropClient.java");
const CLASS: &str = "InteropClient";

/// The Java client of one Kafka release.
#[derive(Debug, Clone)]
pub struct Java {
    version: String,
    classpath: String,
    /// A properties file `InteropClient --config` adds to each client's configuration.
    config: Option<PathBuf>,
}

impl Java {
    /// The client of `version` (an alias or exact release), fetching its jars if needed and
    /// compiling `InteropClient` once per source text and release.
    pub fn new(version: &str) -> Java {
        let version = super::broker::resolve_version(version);
        let libs = kafka_cache().join(&version).join("libs");
        if !libs.join(format!("kafka-clients-{version}.jar")).is_file() {
            super::broker::fetch(&version);
        }
        let classes = compile(&version, &libs);
        Java {
            classpath: format!("{}/*:{}", libs.display(), classes.display()),
            version,
            config: None,
        }
    }

    /// The same client with `props` (Java client properties: `security.protocol`, `ssl.*`,
    /// `sasl.*`) added to every producer and consumer it runs. They go through a properties
    /// file in `target/interop-java/config`, written here.
    pub fn with_config(&self, props: &[(&str, String)]) -> Java {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/interop-java/config");
        std::fs::create_dir_all(&dir).unwrap();
        let n = N.fetch_add(1, Ordering::Relaxed);
        let file = dir.join(format!("{}-{n}.properties", std::process::id()));
        // Properties-file escaping of the values (the keys are plain property names).
        let escape = |s: &str| s.replace('\\', "\\\\").replace('\n', "\\n");
        let text: String = props
            .iter()
            .map(|(k, v)| format!("{k}={}\n", escape(v)))
            .collect();
        std::fs::write(&file, text).unwrap();
        Java {
            config: Some(file),
            ..self.clone()
        }
    }

    /// The exact release, e.g. `3.9.2`.
    pub fn version(&self) -> &str {
        &self.version
    }

    fn args(&self, rest: &[&str]) -> Vec<String> {
        // A client JVM needs little; C1 only starts it faster.
        let mut args: Vec<String> = [
            "-Xmx256m",
            "-XX:TieredStopAtLevel=1",
            "-cp",
            &self.classpath,
            CLASS,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if let Some(config) = &self.config {
            args.push("--config".into());
            args.push(config.display().to_string());
        }
        args.extend(rest.iter().map(|s| s.to_string()));
        args
    }

    /// Writes `per_partition` records with values `p<partition>-<i>` to each of the first
    /// `partitions` partitions of `topic` with Kafka's producer.
    pub fn produce(&self, bootstrap: &str, topic: &str, partitions: i32, per_partition: usize) {
        self.produce_with(bootstrap, topic, partitions, per_partition, None);
    }

    /// As [`Java::produce`], but batched and compressed with `compression` (a Kafka
    /// `compression.type`), each record also with key `k<partition>-<i>` and headers
    /// `("i", "<i>")` and `("nothing", null)`.
    pub fn produce_compressed(
        &self,
        bootstrap: &str,
        topic: &str,
        partitions: i32,
        per_partition: usize,
        compression: &str,
    ) {
        self.produce_with(bootstrap, topic, partitions, per_partition, Some(compression));
    }

    fn produce_with(
        &self,
        bootstrap: &str,
        topic: &str,
        partitions: i32,
        per_partition: usize,
        compression: Option<&str>,
    ) {
        let (partitions_arg, per_partition_arg) = (partitions.to_string(), per_partition.to_string());
        let mut rest = vec!["produce", bootstrap, topic, &partitions_arg, &per_partition_arg];
        rest.extend(compression);
        let args = self.args(&rest);
        let out = Process::run("java producer", "java", &args, Duration::from_secs(60));
        let expect = format!("produced {}", partitions as usize * per_partition);
        assert!(out.contains(&expect), "java producer printed {out:?}");
    }

    /// Starts Kafka's consumer in `group` with the range assignor, static if `instance` is
    /// given, reading `topic` from the earliest offset. It prints
    /// `# assigned generation=G leader=true|false partitions=0,1` after each rebalance and
    /// `partition offset value` per record.
    pub fn consumer(
        &self,
        bootstrap: &str,
        topic: &str,
        group: &str,
        client_id: &str,
        instance: Option<&str>,
    ) -> Process {
        let mut rest = vec!["consume", bootstrap, topic, group, client_id];
        rest.extend(instance);
        Process::spawn(&format!("java consumer {client_id}"), "java", &self.args(&rest))
    }
}

/// Runs `source`, a Java program of one class named `class`, in source-file mode (JDK 11+) with
/// the jars of `version` (the broker's) on the classpath, and waits for it; panics with its
/// output if it fails. For one-off admin steps the crate's API has no call for (ACLs).
pub fn run_source(version: &str, class: &str, source: &str, args: &[&str]) {
    run_source_output(version, class, source, args);
}

/// As [`run_source`], returning what the program printed on stdout.
pub fn run_source_output(version: &str, class: &str, source: &str, args: &[&str]) -> String {
    let version = super::broker::resolve_version(version);
    let libs = kafka_cache().join(&version).join("libs");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/interop-java")
        .join(format!(".run-{class}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{class}.java"));
    std::fs::write(&file, source).unwrap();
    let out = Command::new("java")
        .args(["-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp"])
        .arg(format!("{}/*", libs.display()))
        .arg(&file)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run java: {e}"));
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "java {class}.java {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Where `scripts/kafka` keeps releases.
fn kafka_cache() -> PathBuf {
    match std::env::var_os("KAFKA_CACHE") {
        Some(dir) => PathBuf::from(dir),
        None => {
            PathBuf::from(std::env::var_os("HOME").expect("HOME is not set")).join(".cache/kafka-group/kafka")
        }
    }
}

/// Compiles into `target/interop-java/<release>-<hash of the source>`: a directory is complete
/// once it exists, as it is renamed into place, so test binaries running side by side share it.
fn compile(version: &str, libs: &Path) -> PathBuf {
    // One compilation at a time in this process; the second caller then finds the first's.
    static COMPILING: Mutex<()> = Mutex::new(());
    let _guard = COMPILING.lock().unwrap_or_else(|p| p.into_inner());
    let mut h = DefaultHasher::new();
    SOURCE.hash(&mut h);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/interop-java");
    let dir = root.join(format!("{version}-{:016x}", h.finish()));
    if dir.join(format!("{CLASS}.class")).is_file() {
        return dir;
    }
    let tmp = root.join(format!(".tmp-{version}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let source = tmp.join(format!("{CLASS}.java"));
    std::fs::write(&source, SOURCE).unwrap();
    let out = Command::new("javac")
        .arg("-cp")
        .arg(format!("{}/*", libs.display()))
        .arg("-d")
        .arg(&tmp)
        .arg(&source)
        .output()
        .unwrap_or_else(|e| panic!("cannot run javac (a JDK 17+ is needed): {e}"));
    assert!(
        out.status.success(),
        "javac {CLASS}.java against Kafka {version} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    if std::fs::rename(&tmp, &dir).is_err() {
        // Someone else put it there first; theirs is the same.
        let _ = std::fs::remove_dir_all(&tmp);
    }
    dir
}
