//! Topic-aware fake embeddings. Real embedding models put texts about the same
//! subject close together even when they share no words; a hashed bag of words
//! cannot, so vector search could not be tested with it. Here every word of a
//! small hand-written lexicon pulls its text towards that topic's direction,
//! and every other word adds a small hashed component of its own (so identical
//! wording still scores highest). Like real models, it says little about
//! identifiers: tokens with digits and one- or two-letter tokens are ignored,
//! so a rare id like `OX-4711` is found by full-text search, not by vectors.
//! Deterministic, so tests can rely on it.

/// Topic name and the word stems that signal it. A word matches a stem when it
/// starts with it (so `puppies` matches `pupp`).
const TOPICS: &[(&str, &[&str])] = &[
    (
        "pets",
        &[
            "dog", "pupp", "canine", "cat", "kitten", "feline", "pet", "vet", "leash", "bark", "fur", "paw",
            "kennel", "rabies", "vaccin", "groom", "hound", "terrier", "labrador", "collie", "walkies",
        ],
    ),
    (
        "cooking",
        &[
            "recipe",
            "bake",
            "baking",
            "oven",
            "cook",
            "kitchen",
            "dinner",
            "lunch",
            "breakfast",
            "flour",
            "sugar",
            "sauce",
            "pasta",
            "bread",
            "soup",
            "spice",
            "garlic",
            "meal",
            "dish",
            "cuisine",
            "simmer",
            "roast",
            "dough",
            "lasagn",
            "risotto",
        ],
    ),
    (
        "travel",
        &[
            "flight",
            "airport",
            "trip",
            "vacation",
            "holiday",
            "hotel",
            "plane",
            "passport",
            "luggage",
            "suitcase",
            "journey",
            "tour",
            "visa",
            "boarding",
            "airline",
            "itinerar",
            "destination",
            "abroad",
            "travel",
            "lisbon",
            "tokyo",
            "kyoto",
        ],
    ),
    (
        "finance",
        &[
            "money", "bank", "budget", "invest", "stock", "loan", "mortgage", "tax", "salary", "saving",
            "expense", "dollar", "euro", "payment", "invoice", "account", "interest", "pension", "debt",
            "spend", "financ",
        ],
    ),
    (
        "health",
        &[
            "doctor", "medic", "hospital", "pill", "symptom", "headache", "fever", "sleep", "exercise",
            "workout", "gym", "diet", "allerg", "pain", "therap", "dentist", "blood", "pressure", "injur",
            "physio", "clinic", "nurse",
        ],
    ),
    (
        "music",
        &[
            "song",
            "guitar",
            "piano",
            "melod",
            "concert",
            "band",
            "album",
            "lyric",
            "chord",
            "drum",
            "violin",
            "orchestra",
            "sing",
            "music",
            "tune",
            "rhythm",
            "jazz",
            "playlist",
            "vinyl",
        ],
    ),
    (
        "programming",
        &[
            "code", "coding", "bug", "compil", "function", "rust", "python", "deploy", "server", "database",
            "api", "git", "commit", "refactor", "debug", "crash", "stack", "library", "crate", "binary",
            "kubernet", "docker", "program",
        ],
    ),
    (
        "family",
        &[
            "mother",
            "mom",
            "mum",
            "father",
            "dad",
            "sister",
            "brother",
            "daughter",
            "son",
            "wife",
            "husband",
            "grandm",
            "grandp",
            "aunt",
            "uncle",
            "cousin",
            "parent",
            "child",
            "kid",
            "famil",
            "birthday",
            "anniversar",
            "wedding",
        ],
    ),
    (
        "garden",
        &[
            "garden",
            "plant",
            "flower",
            "tomato",
            "seed",
            "soil",
            "compost",
            "water",
            "prune",
            "lawn",
            "weed",
            "bloom",
            "rose",
            "tulip",
            "shrub",
            "herb",
            "harvest",
            "greenhouse",
            "balcon",
        ],
    ),
    (
        "weather",
        &[
            "rain",
            "sunny",
            "snow",
            "storm",
            "forecast",
            "temperature",
            "wind",
            "cloud",
            "humid",
            "weather",
            "thunder",
            "umbrella",
            "drizzle",
            "heatwave",
            "frost",
        ],
    ),
    (
        "work",
        &[
            "meeting",
            "manager",
            "deadline",
            "project",
            "colleague",
            "office",
            "team",
            "client",
            "report",
            "quarter",
            "review",
            "promotion",
            "standup",
            "roadmap",
            "okr",
            "boss",
            "hire",
            "interview",
            "career",
        ],
    ),
    (
        "sport",
        &[
            "football",
            "soccer",
            "tennis",
            "match",
            "goal",
            "score",
            "league",
            "runner",
            "marathon",
            "cycling",
            "bike",
            "swim",
            "race",
            "coach",
            "athlet",
            "champion",
            "tournament",
            "hiking",
            "climb",
        ],
    ),
    (
        "reading",
        &[
            "book",
            "novel",
            "author",
            "chapter",
            "read",
            "library",
            "poem",
            "poetry",
            "story",
            "fiction",
            "kindle",
            "paperback",
            "essay",
            "literatur",
            "biograph",
        ],
    ),
    (
        "car",
        &[
            "car", "engine", "tyre", "tire", "fuel", "petrol", "garage", "mechanic", "brake", "drive",
            "driving", "vehicle", "battery", "oil", "parking", "motor",
        ],
    ),
    (
        "home",
        &[
            "house",
            "apartment",
            "flat",
            "rent",
            "landlord",
            "furniture",
            "sofa",
            "kitchen",
            "bathroom",
            "repair",
            "plumber",
            "leak",
            "heating",
            "boiler",
            "move",
            "moving",
            "neighbo",
            "renovat",
            "paint",
        ],
    ),
    (
        "language",
        &[
            "spanish",
            "french",
            "german",
            "japanese",
            "italian",
            "vocabular",
            "grammar",
            "duolingo",
            "fluent",
            "lesson",
            "verb",
            "pronunciat",
            "translat",
            "conjugat",
            "language",
        ],
    ),
];

/// Words too common to say anything about a text's subject.
const STOPWORDS: &[&str] = &[
    "a", "an", "the", "and", "or", "but", "of", "to", "in", "on", "at", "for", "with", "is", "are", "was",
    "were", "be", "been", "it", "its", "this", "that", "i", "my", "me", "we", "our", "you", "your", "he",
    "she", "they", "them", "his", "her", "their", "what", "which", "who", "when", "where", "how", "do",
    "does", "did", "about", "from", "by", "as", "so", "if", "not", "no", "yes", "have", "has", "had", "will",
    "would", "can", "could", "should", "there", "here", "any", "some", "all", "up", "out",
];

const TOPIC_WEIGHT: f32 = 1.0;
const WORD_WEIGHT: f32 = 0.3;

/// A deterministic unit-ish embedding of `text` in `dimensions` dimensions.
pub fn embed(text: &str, dimensions: usize) -> Vec<f32> {
    let dimensions = dimensions.max(1);
    let mut vector = vec![0f32; dimensions];
    for word in text
        .to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() > 2 && !w.chars().any(|c| c.is_ascii_digit()) && !STOPWORDS.contains(w))
    {
        for (index, (_, stems)) in TOPICS.iter().enumerate() {
            if stems.iter().any(|stem| word.starts_with(stem)) {
                add_direction(&mut vector, 0x7091c_u64.wrapping_add(index as u64), TOPIC_WEIGHT);
            }
        }
        add_direction(&mut vector, fnv(word), WORD_WEIGHT);
    }
    if vector.iter().all(|v| *v == 0.0) {
        // Nothing meaningful: a fixed direction, as real models return something.
        add_direction(&mut vector, fnv(""), 1.0);
    }
    let norm = vector.iter().map(|v| v * v).sum::<f32>().sqrt();
    if norm > 0.0 {
        vector.iter_mut().for_each(|v| *v /= norm);
    }
    vector
}

/// Adds `weight` times a pseudo-random unit direction seeded by `seed`.
/// Random directions in many dimensions are nearly orthogonal, so unrelated
/// topics and words stay far apart.
fn add_direction(vector: &mut [f32], seed: u64, weight: f32) {
    let scale = weight / (vector.len() as f32).sqrt();
    for (index, value) in vector.iter_mut().enumerate() {
        let bits = splitmix64(seed ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let sign = if bits >> 63 == 0 { 1.0 } else { -1.0 };
        *value += sign * scale;
    }
}

/// A well-mixed 64-bit hash of `x`, so neighbouring seeds give unrelated signs.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn fnv(word: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in word.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cosine(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn paraphrases_without_shared_words_are_close_and_other_topics_are_not() {
        let dims = 384;
        let dog = embed("Rex the puppy needs his rabies shot at the vet", dims);
        let paraphrase = embed("canine vaccination appointment", dims);
        let cooking = embed("grandma's lasagna recipe uses fresh garlic", dims);
        assert!(cosine(&dog, &paraphrase) > 0.5, "{}", cosine(&dog, &paraphrase));
        assert!(cosine(&dog, &cooking).abs() < 0.3, "{}", cosine(&dog, &cooking));
    }

    #[test]
    fn identical_text_is_identical_and_normalised() {
        let a = embed("deploy the rust server", 64);
        assert_eq!(a, embed("deploy the rust server", 64));
        let norm: f32 = a.iter().map(|v| v * v).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4);
    }
}
