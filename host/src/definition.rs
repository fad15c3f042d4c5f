//! Actor definitions: a component loaded, checked against the WIT world and
//! pre-instantiated once, ready to start any number of instances.

use std::path::PathBuf;
use std::sync::Arc;

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::{Component, Linker};

use crate::bindings::ExportsPre;
use crate::cache::CompileCache;
use crate::config::{ActorOptions, MAX_COMPONENT_BYTES};
use crate::instance::InstanceState;
use crate::manifest::ActorSpec;

/// A component that could not become an actor definition.
#[derive(Debug, thiserror::Error)]
#[error("cannot load actor `{actor}` from {}: {reason}", path.display())]
pub struct LoadError {
    /// The actor.
    pub actor: String,
    /// The component file.
    pub path: PathBuf,
    /// What is wrong, and what to do about it.
    pub reason: String,
}

/// One actor: its options and its pre-instantiated component.
pub(crate) struct ActorDefinition {
    pub(crate) name: Arc<str>,
    pub(crate) options: ActorOptions,
    pub(crate) pre: ExportsPre<InstanceState>,
    /// Grows with every deploy of the actor on this host (0: the
    /// manifest's component). A cell started from an older version is
    /// replaced before its next operation.
    pub(crate) version: u64,
    /// The SHA-256 of the component's bytes, in hex.
    pub(crate) digest: String,
}

impl ActorDefinition {
    /// This definition as version `version` of its actor.
    pub(crate) fn with_version(mut self, version: u64) -> ActorDefinition {
        self.version = version;
        self
    }
}

/// The SHA-256 of a component's `bytes`, in hex: what names it.
pub(crate) fn digest(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

const COMPONENT_HEADER: [u8; 8] = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];
const CORE_MODULE_HEADER: [u8; 8] = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];

/// Loads `spec`'s component, from the compile cache when it can.
pub(crate) fn load(
    engine: &Engine,
    linker: &Linker<InstanceState>,
    cache: &CompileCache,
    spec: &ActorSpec,
) -> Result<ActorDefinition, LoadError> {
    let bytes = read(spec)?;
    from_bytes(engine, linker, cache, &spec.name, &spec.options, &bytes)
        .map_err(|reason| load_error(spec, reason))
}

/// `spec`'s definition if the compile cache holds its compiled component
/// (a fast load), `None` if the component must be compiled first. A file
/// that is missing, too large or no component is an error, and so is a
/// cached component that does not fit the host's world.
pub(crate) fn load_cached(
    engine: &Engine,
    linker: &Linker<InstanceState>,
    cache: &CompileCache,
    spec: &ActorSpec,
) -> Result<Option<ActorDefinition>, LoadError> {
    let bytes = read(spec)?;
    let Some(component) = cache.cached(engine, &bytes) else {
        return Ok(None);
    };
    define(linker, &component, &spec.name, &spec.options, &bytes)
        .map(Some)
        .map_err(|reason| load_error(spec, reason))
}

/// The bytes of `spec`'s component file, checked to be a component of
/// acceptable size (not compiled).
fn read(spec: &ActorSpec) -> Result<Vec<u8>, LoadError> {
    let fail = |reason: String| load_error(spec, reason);
    let meta = std::fs::metadata(&spec.component).map_err(|e| {
        fail(if e.kind() == std::io::ErrorKind::NotFound {
            "the file does not exist (build it with `burrow build`)".into()
        } else {
            format!("cannot read the file: {e}")
        })
    })?;
    if meta.len() > MAX_COMPONENT_BYTES {
        return Err(fail(format!(
            "the file is {} bytes; the limit is {MAX_COMPONENT_BYTES} bytes",
            meta.len()
        )));
    }
    let bytes =
        std::fs::read(&spec.component).map_err(|e| fail(format!("cannot read the file: {e}")))?;
    check(&bytes).map_err(fail)?;
    Ok(bytes)
}

fn load_error(spec: &ActorSpec, reason: String) -> LoadError {
    LoadError {
        actor: spec.name.clone(),
        path: spec.component.clone(),
        reason,
    }
}

/// Makes a definition (version 0) of the component `bytes` for the actor
/// `name`, compiling it or taking it from the compile cache. The error
/// says what is wrong with the component.
pub(crate) fn from_bytes(
    engine: &Engine,
    linker: &Linker<InstanceState>,
    cache: &CompileCache,
    name: &str,
    options: &ActorOptions,
    bytes: &[u8],
) -> Result<ActorDefinition, String> {
    check(bytes)?;
    let component = cache
        .load(engine, bytes)
        .map_err(|e| format!("the component does not compile: {e:#}"))?;
    define(linker, &component, name, options, bytes)
}

/// The component's size and header: what can be checked without
/// compiling it.
fn check(bytes: &[u8]) -> Result<(), String> {
    if bytes.len() as u64 > MAX_COMPONENT_BYTES {
        return Err(format!(
            "the component is {} bytes; the limit is {MAX_COMPONENT_BYTES} bytes",
            bytes.len()
        ));
    }
    check_header(bytes)
}

/// A definition (version 0) of the compiled `component`, made of `bytes`.
fn define(
    linker: &Linker<InstanceState>,
    component: &Component,
    name: &str,
    options: &ActorOptions,
    bytes: &[u8],
) -> Result<ActorDefinition, String> {
    check_wit_version(component)?;
    prepare_memory_images(component)?;
    let instance_pre = linker
        .instantiate_pre(component)
        .map_err(|e| format!("the component imports something the host does not provide: {e:#}"))?;
    let pre = ExportsPre::new(instance_pre).map_err(|e| {
        format!(
            "the component does not export the burrow:actor/guest@0.1.0 interface \
             (world burrow:actor/actor): {e:#}"
        )
    })?;
    Ok(ActorDefinition {
        name: name.into(),
        options: options.clone(),
        pre,
        version: 0,
        digest: digest(bytes),
    })
}

/// How many times the memory images of a component are tried before its
/// load fails (see [`prepare_memory_images`]).
const MEMORY_IMAGE_ATTEMPTS: u32 = 5;

/// Makes the component's copy-on-write memory images now, at load, rather
/// than at its first instantiation. On Linux each is a memfd that wasmtime
/// writes and then seals read-only, and the kernel refuses the seal (EBUSY)
/// while a page just written still holds a passing extra reference: seen
/// once, under load, as an instance that failed to start ("cannot add
/// seals to the memfd"). Here that refusal is tried again a few times, a
/// little later each time; another error fails at once.
fn prepare_memory_images(component: &Component) -> Result<(), String> {
    retry_busy_seal(MEMORY_IMAGE_ATTEMPTS, || {
        component.initialize_copy_on_write_image()
    })
    .map_err(|e| format!("cannot prepare the component's memory: {e:#}"))
}

/// Runs `op` up to `attempts` times while it fails because a memfd could
/// not be sealed, sleeping 10 ms more before each new attempt.
fn retry_busy_seal(
    attempts: u32,
    mut op: impl FnMut() -> wasmtime::Result<()>,
) -> wasmtime::Result<()> {
    let mut attempt = 1;
    loop {
        match op() {
            Err(e) if attempt < attempts && format!("{e:#}").contains("seals to the memfd") => {
                std::thread::sleep(std::time::Duration::from_millis(10 * u64::from(attempt)));
                attempt += 1;
            }
            done => return done,
        }
    }
}

/// The version of the WIT package `burrow:actor` this host provides.
pub(crate) const WIT_VERSION: &str = "0.1.0";

/// Fails, naming both versions, when the component was built against
/// another version of the WIT package than the host's: an SDK older or
/// newer than this `burrow`.
fn check_wit_version(component: &Component) -> Result<(), String> {
    let engine = component.engine();
    let ty = component.component_type();
    let names = ty
        .imports(engine)
        .map(|(name, _)| name)
        .chain(ty.exports(engine).map(|(name, _)| name));
    for name in names {
        let Some(interface) = name.strip_prefix("burrow:actor/") else {
            continue;
        };
        let version = interface.split_once('@').map_or("", |(_, version)| version);
        if version != WIT_VERSION {
            let built = if version.is_empty() {
                "an unversioned burrow:actor".to_owned()
            } else {
                format!("burrow:actor@{version}")
            };
            return Err(format!(
                "the component was built against the WIT package {built} (it uses `{name}`), \
                 and this burrow provides burrow:actor@{WIT_VERSION}: build it with the SDK \
                 of this burrow's version, or run a burrow that provides {built}"
            ));
        }
    }
    Ok(())
}

fn check_header(bytes: &[u8]) -> Result<(), String> {
    if bytes.starts_with(&COMPONENT_HEADER) {
        Ok(())
    } else if bytes.starts_with(&CORE_MODULE_HEADER) {
        Err(
            "this is a core WebAssembly module, not a component: build for the \
             wasm32-wasip2 target (or wrap it with `wasm-tools component new`)"
                .into(),
        )
    } else if bytes.starts_with(&COMPONENT_HEADER[..4]) {
        Err("this WebAssembly binary has an unsupported version or layer".into())
    } else {
        Err("this is not a WebAssembly component (it does not start with `\\0asm`)".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A component that imports an empty instance named `import`.
    fn importing(import: &str) -> Component {
        let engine = crate::engine::build(1, false).unwrap();
        let bytes =
            wat::parse_str(format!("(component (import \"{import}\" (instance)))")).unwrap();
        Component::new(&engine, bytes).unwrap()
    }

    #[test]
    fn a_refused_memfd_seal_is_tried_again_and_other_errors_are_not() {
        let busy = || wasmtime::Error::msg("cannot add seals to the memfd");
        let mut calls = 0;
        let done = retry_busy_seal(5, || {
            calls += 1;
            if calls < 3 { Err(busy()) } else { Ok(()) }
        });
        assert!(done.is_ok());
        assert_eq!(calls, 3);

        let mut calls = 0;
        let done = retry_busy_seal(5, || {
            calls += 1;
            Err(busy())
        });
        assert!(done.is_err());
        assert_eq!(calls, 5);

        let mut calls = 0;
        let done = retry_busy_seal(5, || {
            calls += 1;
            Err(wasmtime::Error::msg("out of memory"))
        });
        assert!(done.is_err());
        assert_eq!(calls, 1);
    }

    #[test]
    fn the_wit_version_is_the_wit_packages() {
        let wit = include_str!("../../wit/actor.wit");
        assert!(
            wit.contains(&format!("package burrow:actor@{WIT_VERSION};")),
            "wit/actor.wit and WIT_VERSION disagree"
        );
    }

    #[test]
    fn a_component_of_another_wit_version_is_refused_naming_both() {
        check_wit_version(&importing(&format!("burrow:actor/log@{WIT_VERSION}"))).unwrap();
        check_wit_version(&importing("wasi:io/streams@0.2.6")).unwrap();
        let err = check_wit_version(&importing("burrow:actor/log@0.2.0")).unwrap_err();
        assert!(
            err.contains("burrow:actor@0.2.0")
                && err.contains(&format!("burrow:actor@{WIT_VERSION}"))
                && err.contains("`burrow:actor/log@0.2.0`"),
            "{err}"
        );
        let err = check_wit_version(&importing("burrow:actor/log")).unwrap_err();
        assert!(err.contains("an unversioned burrow:actor"), "{err}");
    }
}
