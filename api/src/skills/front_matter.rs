//! A skill's `SKILL.md`: YAML front matter between `---` lines with at least
//! `name` and `description` (one-line scalars, optionally quoted; folded
//! `>`/`|` blocks of indented lines too, as other assistants' skills use),
//! then the markdown body. Other keys are kept as they are and ignored.

/// What a `SKILL.md` says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrontMatter {
    pub name: String,
    pub description: String,
}

/// Splits a `SKILL.md` into its front matter and body.
pub fn parse(text: &str) -> Result<(FrontMatter, &str), String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
        .ok_or("SKILL.md must start with YAML front matter: a line `---`, `name:` and `description:`, then `---`")?;
    let end = rest
        .find("\n---")
        .ok_or("the front matter has no closing `---` line")?;
    let (header, after) = (&rest[..end], &rest[end + 4..]);
    let body = after
        .trim_start_matches(['\r', '\n', '-'])
        .trim_start_matches(['\r', '\n']);
    let lines: Vec<&str> = header.lines().collect();
    let mut name = None;
    let mut description = None;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        i += 1;
        if line.starts_with([' ', '\t', '#']) || line.trim().is_empty() {
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            return Err(format!("front matter line {line:?} is not `key: value`"));
        };
        let mut value = value.trim().to_string();
        if matches!(value.as_str(), ">" | "|" | ">-" | "|-" | ">+" | "|+") {
            let mut parts = Vec::new();
            while i < lines.len() && (lines[i].starts_with([' ', '\t']) || lines[i].trim().is_empty()) {
                parts.push(lines[i].trim());
                i += 1;
            }
            value = parts.join(" ").trim().to_string();
        } else if value.len() >= 2
            && ((value.starts_with('"') && value.ends_with('"'))
                || (value.starts_with('\'') && value.ends_with('\'')))
        {
            value = value[1..value.len() - 1].to_string();
        }
        match key.trim() {
            "name" => name = Some(value),
            "description" => description = Some(value),
            _ => {}
        }
    }
    let name = name
        .filter(|n| !n.is_empty())
        .ok_or("the front matter needs a `name`")?;
    let description = description
        .filter(|d| !d.is_empty())
        .ok_or("the front matter needs a `description` (the prompt lists it)")?;
    Ok((FrontMatter { name, description }, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_quoted_and_folded_values_are_read() {
        let (meta, body) = parse("---\nname: pdf-tools\ndescription: \"Fill and merge PDFs\"\nlicense: MIT\n---\n# PDF\n\nUse qpdf.\n").unwrap();
        assert_eq!(meta.name, "pdf-tools");
        assert_eq!(meta.description, "Fill and merge PDFs");
        assert_eq!(body, "# PDF\n\nUse qpdf.\n");
        let (meta, _) = parse("---\nname: x\ndescription: >\n  Two lines\n  folded.\n---\nbody").unwrap();
        assert_eq!(meta.description, "Two lines folded.");
    }

    #[test]
    fn missing_parts_are_named() {
        assert!(parse("# no front matter").unwrap_err().contains("must start"));
        assert!(parse("---\nname: x\n").unwrap_err().contains("closing"));
        assert!(parse("---\nname: x\n---\n").unwrap_err().contains("description"));
        assert!(parse("---\ndescription: d\n---\n").unwrap_err().contains("name"));
    }
}
