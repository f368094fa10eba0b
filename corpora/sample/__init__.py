"""The bundled sample corpus, installed as package data ``koelectra_kit.sample`` (see pyproject.toml), so
``koelectra-kit quickstart`` runs from any folder."""
