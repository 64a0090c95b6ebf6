//! The optional parts this build was compiled with. The default build has
//! them all; `cargo build --no-default-features` is the gateway alone,
//! without Bedrock's SDK, the built-in embedding model or the chat bots
//! (`api/Cargo.toml` `[features]`). A config asking for a part that is not
//! built in stops startup with [`Feature::missing`]'s message.

/// One optional part of the build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Feature {
    /// The cargo feature's name.
    pub name: &'static str,
    /// Compiled into this build.
    pub built: bool,
}

pub const BEDROCK: Feature = Feature {
    name: "bedrock",
    built: cfg!(feature = "bedrock"),
};
pub const LOCAL_EMBEDDER: Feature = Feature {
    name: "local-embedder",
    built: cfg!(feature = "local-embedder"),
};
pub const TELEGRAM: Feature = Feature {
    name: "telegram",
    built: cfg!(feature = "telegram"),
};
pub const DISCORD: Feature = Feature {
    name: "discord",
    built: cfg!(feature = "discord"),
};
/// Every optional part.
pub const ALL: [Feature; 4] = [BEDROCK, LOCAL_EMBEDDER, TELEGRAM, DISCORD];

impl Feature {
    /// The error for `what` (a config path and value) in a build without this part.
    pub fn missing(self, what: &str) -> String {
        format!(
            "{what} is not in this build (built without the \"{}\" feature)",
            self.name
        )
    }
}

/// The parts built in and left out, for `onyx doctor`.
pub fn describe() -> String {
    let (built, left): (Vec<Feature>, Vec<Feature>) = ALL.iter().partition(|f| f.built);
    let names = |list: &[Feature]| list.iter().map(|f| f.name).collect::<Vec<_>>().join(", ");
    if left.is_empty() {
        format!("all optional parts: {}", names(&built))
    } else {
        format!("with: {}; without: {}", names(&built), names(&left))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_part_names_the_path_and_the_feature() {
        assert_eq!(
            BEDROCK.missing("providers.aws.type: \"bedrock\""),
            "providers.aws.type: \"bedrock\" is not in this build (built without the \"bedrock\" feature)"
        );
        let described = describe();
        for feature in ALL {
            assert!(described.contains(feature.name), "{described}");
        }
    }
}
