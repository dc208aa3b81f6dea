"""Example finance MCP server (goal mode's domain): quotes, top movers, symbol search, a notifier, and its manifest.

    python -m mcp_servers.finance.server [--host 127.0.0.1] [--port 8300] [--delay-ms 0]

Tools: ``search_symbol(query)``, ``get_stock_price(symbol)``, ``get_top_gainers(market_text=None, limit=3)``,
``get_top_losers(market_text=None, limit=3)``, ``send_message(message)`` and ``sent_messages()``. The resource
``manifest://finance`` is the domain's manifest (docs/goals.md): its goals with their ``entities_schema`` and its
capabilities with their metadata, which is all the platform's goal mode needs to serve the domain.

Demo data only, fixed (no clock, no randomness): a few Brazilian and Nordic stocks, Nordea listed twice
(Stockholm and Helsinki) so that "qual o preço da Nordea?" is ambiguous. ``send_message`` delivers nothing: it
records the message in this process so that a test can read back what was sent.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

from mcp_servers.common import READ_ONLY, LogLevel, main, new_server

NAME = "finance"
DEFAULT_PORT = 8300
PORT_ENV = "MCP_FINANCE_PORT"
MANIFEST_URI = f"manifest://{NAME}"

# Each market's names as customers write them, folded (pt, en, es), and the stems of its adjectives ("brasileiras",
# "Swedish", "noruegas"), which name it too.
MARKETS: dict[str, dict[str, Any]] = {
    "BR": {
        "exchange": "B3",
        "currency": "BRL",
        "timezone": "America/Sao_Paulo",
        "names": ["brasil", "brazil", "b3", "br"],
        "stems": ["brasileir", "brazilian", "brasilen"],
    },
    "SE": {
        "exchange": "OMX Stockholm",
        "currency": "SEK",
        "timezone": "Europe/Stockholm",
        "names": ["suecia", "sweden", "estocolmo", "stockholm"],
        "stems": ["suec", "swedish"],
    },
    "FI": {
        "exchange": "OMX Helsinki",
        "currency": "EUR",
        "timezone": "Europe/Helsinki",
        "names": ["finlandia", "finland", "helsinki", "helsinque"],
        "stems": ["finland", "finnish", "finlandes"],
    },
    "NO": {
        "exchange": "Oslo Børs",
        "currency": "NOK",
        "timezone": "Europe/Oslo",
        "names": ["noruega", "norway", "oslo"],
        "stems": ["norueg", "norwegian"],
    },
}
LANGUAGES = ("pt", "en", "es")
# What the tools say, in the customer's language (the manifest's language_param brings it; Portuguese by default).
SAID: dict[str, dict[str, str]] = {
    "pt": {
        "price": "{name} ({symbol}) está em {price:.2f} {currency} ({change:+.2f}% no dia).",
        "gainers": "Maiores altas",
        "losers": "Maiores baixas",
        "none": "nenhuma",
        "sent": "Notificação enviada.",
    },
    "en": {
        "price": "{name} ({symbol}) is at {price:.2f} {currency} ({change:+.2f}% today).",
        "gainers": "Top gainers",
        "losers": "Top losers",
        "none": "none",
        "sent": "Notification sent.",
    },
    "es": {
        "price": "{name} ({symbol}) está en {price:.2f} {currency} ({change:+.2f}% en el día).",
        "gainers": "Mayores subidas",
        "losers": "Mayores caídas",
        "none": "ninguna",
        "sent": "Notificación enviada.",
    },
}

STOCKS: dict[str, dict[str, Any]] = {
    "PETR4.SA": {"name": "Petrobras PN", "market": "BR", "price": 38.20, "change_pct": 1.85},
    "VALE3.SA": {"name": "Vale ON", "market": "BR", "price": 61.47, "change_pct": -2.10},
    "ITUB4.SA": {"name": "Itaú Unibanco PN", "market": "BR", "price": 34.05, "change_pct": 0.62},
    "MGLU3.SA": {"name": "Magazine Luiza ON", "market": "BR", "price": 9.12, "change_pct": 4.33},
    "NDA-SE.ST": {"name": "Nordea Bank", "market": "SE", "price": 112.50, "change_pct": 0.45},
    "NDA-FI.HE": {"name": "Nordea Bank", "market": "FI", "price": 10.05, "change_pct": 0.38},
    "ERIC-B.ST": {"name": "Ericsson B", "market": "SE", "price": 71.32, "change_pct": -1.27},
    "EQNR.OL": {"name": "Equinor", "market": "NO", "price": 276.40, "change_pct": 2.02},
}

SENT: list[dict[str, Any]] = []  # what send_message "delivered", in this process

UNKNOWN_SYMBOL = "Símbolo {symbol} não encontrado (unknown symbol); use search_symbol."


def _folded(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(char for char in decomposed if not unicodedata.combining(char)).casefold().strip()


def _listing(symbol: str) -> dict[str, Any]:
    stock = STOCKS[symbol]
    market = MARKETS[stock["market"]]
    return {
        "symbol": symbol,
        "name": stock["name"],
        "market": stock["market"],
        "exchange": market["exchange"],
        "currency": market["currency"],
    }


def _said(language: str | None) -> dict[str, str]:
    return SAID.get((language or "").strip().casefold(), SAID["pt"])


def _market_of(text: str | None) -> str | None:
    """``"Brasil"``, ``"Brazil"``, ``"brasileiras"`` → ``"BR"``; ``None`` for no market (every market)."""
    if not text or not text.strip():
        return None
    wanted = _folded(text)
    for code, market in MARKETS.items():
        if wanted == code.casefold() or wanted in market["names"]:
            return code
        if any(wanted.startswith(stem) for stem in market["stems"]):
            return code
    raise ToolError(f"Mercado {text!r} desconhecido (unknown market); conhecidos: {', '.join(MARKETS)}.")


def search_symbol(
    query: Annotated[str, Field(description="Nome ou código como o usuário disse (Nordea, PETR4).")],
) -> dict[str, Any]:
    """Listings whose symbol starts with ``query`` or whose name has it at a word's start: one, several (ambiguous),
    or none ("Banco" is not "Itaú Unibanco")."""
    wanted = _folded(query)
    if not wanted:
        raise ToolError("query vazia (empty query).")
    matches = [
        _listing(symbol)
        for symbol, stock in STOCKS.items()
        if _folded(symbol).startswith(wanted) or re.search(rf"(?<!\w){re.escape(wanted)}", _folded(stock["name"]))
    ]
    return {"query": query, "matches": matches}


LanguageArg = Annotated[str, Field(description="A língua da explicação (the explanation's language): pt, en ou es.")]


def get_stock_price(
    symbol: Annotated[str, Field(description="Código da listagem, ex. PETR4.SA ou NDA-SE.ST.")],
    language: LanguageArg = "pt",
) -> dict[str, Any]:
    """The listing's last price and change, with its market context."""
    key = symbol.strip().upper()
    if key not in STOCKS:
        raise ToolError(UNKNOWN_SYMBOL.format(symbol=symbol))
    stock, listing = STOCKS[key], _listing(key)
    market = MARKETS[stock["market"]]
    explanation = _said(language)["price"].format(
        name=stock["name"], symbol=key, price=stock["price"], currency=market["currency"], change=stock["change_pct"]
    )
    return {
        **listing,
        "price": stock["price"],
        "change_pct": stock["change_pct"],
        "_market_context": {"market": stock["market"], "exchange": market["exchange"], "timezone": market["timezone"]},
        "explanation": explanation,
    }


def _movers(market: str | None, limit: int, *, gainers: bool, language: str = "pt") -> dict[str, Any]:
    code = _market_of(market)
    rows = [
        {**_listing(symbol), "price": stock["price"], "change_pct": stock["change_pct"]}
        for symbol, stock in STOCKS.items()
        if code is None or stock["market"] == code
    ]
    rows = [row for row in rows if (row["change_pct"] > 0) == gainers]
    rows.sort(key=lambda row: row["change_pct"], reverse=gainers)
    top = rows[: max(1, min(limit, 10))]
    said = _said(language)
    title = said["gainers"] if gainers else said["losers"]
    where = f" ({code})" if code else ""
    listed = "; ".join(f"{row['name']} {row['change_pct']:+.2f}%" for row in top) or said["none"]
    return {
        "market": code,
        "direction": "GAINERS" if gainers else "LOSERS",
        "items": top,
        "explanation": f"{title}{where}: {listed}.",
    }


MarketArg = Annotated[str | None, Field(description="Mercado como o usuário disse (Brasil, Suécia); vazio: todos.")]
LimitArg = Annotated[int, Field(ge=1, le=10, description="Quantas listagens (1–10).")]


# The market as the user said it (capabilities take the human-friendly entity and resolve it).
def get_top_gainers(market_text: MarketArg = None, limit: LimitArg = 3, language: LanguageArg = "pt") -> dict[str, Any]:
    """The day's biggest gains, in a market or in all."""
    return _movers(market_text, limit, gainers=True, language=language)


def get_top_losers(market_text: MarketArg = None, limit: LimitArg = 3, language: LanguageArg = "pt") -> dict[str, Any]:
    """The day's biggest losses, in a market or in all."""
    return _movers(market_text, limit, gainers=False, language=language)


def send_message(
    message: Annotated[str, Field(min_length=1, max_length=2000, description="O texto a enviar.")],
    language: LanguageArg = "pt",
) -> dict[str, Any]:
    """Record a notification (the demo delivers nothing) and say it was sent."""
    SENT.append({"id": len(SENT) + 1, "message": message})
    return {"sent": True, "id": len(SENT), "explanation": _said(language)["sent"]}


def sent_messages() -> dict[str, Any]:
    """What ``send_message`` recorded in this process, oldest first."""
    return {"messages": list(SENT)}


# A stock's name or ticker as the customer wrote it, for the offline model: a capitalised name (one word or several:
# "Magazine Luiza") or a ticker, after a word that introduces one in Portuguese, English or Spanish ("da Nordea",
# "of Equinor", "are Vale and Petrobras", "cuánto vale Petrobras", a list's comma), or a bare name as the whole
# reply ("Nordea", not "Obrigado!"). Never a market: "in Sweden", "na Suécia" introduce none.
# The platform matches it with RE2 (no lookarounds; \pL is a letter of any script, \b is ASCII there): a
# courtesy word at the start is matched first by an alternative without a value group, so it is read as no name.
# A name: capitalised words, joined by "of" as names are ("Banco do Brasil", "Bank of America", "Banco de la
# Nación"), or a ticker written in lower case ("petr4").
_WORD = r"[A-ZÀ-Ý][\pL\pN_&-]*"
_NAME = (
    rf"{_WORD}(?:\.[A-Z]{{1,2}}\b)?(?:(?:\s+(?:d[aoe]s?|del|de\s+la|of(?:\s+the)?))?\s+{_WORD})*|[a-z]{{4}}\d{{1,2}}\b"
)
_NOT_A_NAME = (
    r"(?i:obrigad|valeu|ok\b|oi\b|ol[aá](?:[^\pL\pN_]|$)|bom\b|boa\b|sim\b|n[aã]o\b"
    r"|thanks?\b|hello\b|hi\b|hola\b|gracias\b|tchau\b|bye\b)"
)
_INTRODUCES = (
    r"(?i:\b(?:da|do|de|das|dos|del|of|for|is|are|about|on|sobre|a|o|os|as|el|la|los|las|e|y|and"
    r"|est[aá]|est[aá]n|est[aã]o)\s+)"
    r"|\b(?:vale|valen|custa|custam|cuesta|cuestan|costs?|cotiza|cotizan)\s+(?:(?:hoje|hoy|agora|ahora|today|now)\s+)?"
    r"|,\s*"
)
# A name said possessively ("Nordea's share price"); "What's", "It's" and the like are read first, as no name.
_NOT_AN_OWNER = r"\b(?i:what|that|it|here|there|let|he|she|who|how|where|one)['’]s\b"
SYMBOL_PATTERN = (
    rf"^\s*{_NOT_A_NAME}|^\s*(?P<value_alone>{_NAME})\s*[?!.]*\s*$|(?:{_INTRODUCES})(?P<value>{_NAME})"
    rf"|{_NOT_AN_OWNER}|(?P<value_owner>{_NAME})['’]s\b"
)
# The markets served, as customers name them (countries, cities, adjectives) in the three languages.
MARKET_PATTERN = (
    r"(?i:\b(?P<value>brasil|brazil|b3|brasileir[oa]s?|brazilian|brasileñ[oa]s?"
    r"|su[eé]cia|suecia|sweden|swedish|suec[oa]s?|estocolmo|stockholm"
    r"|finl[aâ]ndia|finland|finnish|finland[eê]s[ae]?s?|finlandes[ae]s|helsinki|helsinque"
    r"|noruega|norway|norwegian|norueg[oa]s?|oslo)\b)"
)

MANIFEST: dict[str, Any] = {
    "domain": NAME,
    "description": "Cotações, maiores altas e baixas e avisos (quotes, top movers and notifications). Demo data.",
    "goals": [
        {
            "goal": "GET_QUOTE",
            "description": "O preço de uma ou mais ações (the price of one or more stocks).",
            # What goal mode's confirmation names the goal by, in the customer's language (docs/languages.md).
            "translations": {
                "en": {"description": "The price of one or more stocks."},
                "es": {"description": "El precio de una o más acciones."},
            },
            "examples": [
                *("qual o preço da Nordea?", "cotação da PETR4", "quanto está a Vale e a Petrobras?"),
                *("quanto custa uma ação da Petrobras?", "me diga a cotação da Equinor", "qual o valor da Ericsson?"),
                *("what's the price of Nordea?", "how much is Petrobras trading at?", "give me a quote for PETR4"),
                *("how much do Itaú and Ericsson cost?", "price of Magazine Luiza, please"),
                *("¿cuál es la cotización de Nordea?", "cotización de PETR4", "¿cuánto vale Petrobras?"),
                *("precio de Itaú y Ericsson", "¿a cuánto está la acción de Ericsson?"),
            ],
            "capabilities": ["get_stock_price"],
            "entities_schema": {
                "symbol_text": {
                    "type": "string",
                    "required": True,
                    "label": {"pt": "o ativo", "en": "the stock", "es": "el activo"},
                    "description": "o ativo (the stock): nome ou código como o usuário disse, nunca um ticker "
                    "deduzido.",
                    "pattern": SYMBOL_PATTERN,
                },
                "symbols": {
                    "type": "list",
                    "collects": "symbol_text",
                    "carry": False,
                    "label": {"pt": "os ativos", "en": "the stocks", "es": "los activos"},
                    "description": "os ativos (the stocks): vários nomes ou códigos, como o usuário disse.",
                },
                "notify": {
                    "type": "boolean",
                    "carry": False,
                    "keywords": [
                        *("avise", "me avisa", "avisa", "envie", "notifique", "mande", "me manda"),
                        *("avísame", "envíame", "notifícame", "mándame", "mándamelo"),
                        *("notify", "let me know", "send it", "send me", "message me", "text me"),
                    ],
                    "label": {"pt": "o aviso", "en": "the notification", "es": "el aviso"},
                    "description": "o aviso (notify): o usuário pediu para avisar/enviar o resultado.",
                },
            },
        },
        {
            "goal": "TOP_MOVERS",
            "description": "As maiores altas ou baixas do dia (the day's top gainers or losers).",
            "translations": {
                "en": {"description": "The day's top gainers or losers."},
                "es": {"description": "Las mayores subidas o bajadas del día."},
            },
            "examples": [
                *("maiores altas do Brasil", "quais ações mais caíram hoje?", "maiores quedas da Noruega"),
                *("o que mais subiu hoje na bolsa?", "quais as maiores baixas da Finlândia?"),
                *("top gainers in Brazil", "which stocks fell the most today?", "biggest losers in Norway"),
                *("what went up the most today?", "show me today's top movers in Finland"),
                *("mayores subidas de Brasil", "¿qué acciones cayeron más hoy?", "mayores caídas en Noruega"),
                *("¿cuáles subieron más hoy?", "las acciones que más bajaron en Finlandia"),
            ],
            "entities_schema": {
                "direction": {
                    "type": "enum",
                    "values": ["GAINERS", "LOSERS", "BOTH"],
                    "required": True,
                    "label": {"pt": "a direção", "en": "the direction", "es": "la dirección"},
                    "description": "a direção, altas ou baixas (the direction, gainers or losers).",
                    "aliases": {
                        "GAINERS": [
                            *("altas", "alta", "subiram", "subiu", "mais subiram", "ganhos"),
                            *("gainers", "top gainers", "biggest gains", "biggest gainers", "winners", "risers"),
                            *("went up", "up the most", "rose", "gained"),
                            *("mayores subidas", "subidas", "subieron", "subió", "más subieron", "ganadores"),
                        ],
                        "LOSERS": [
                            *("baixas", "baixa", "caíram", "caiu", "mais caíram", "quedas"),
                            *("losers", "top losers", "biggest losses", "biggest losers", "fallers"),
                            *("went down", "down the most", "fell", "dropped"),
                            *("mayores caídas", "caídas", "cayeron", "cayó", "mayores bajadas", "bajadas", "bajaron"),
                            "bajó",
                            "perdedores",
                        ],
                        "BOTH": [
                            *("altas e baixas", "movers", "top movers", "gainers and losers"),
                            *("subidas y caídas", "altas y bajas"),
                        ],
                    },
                    "capability_map": {
                        "GAINERS": "get_top_gainers",
                        "LOSERS": "get_top_losers",
                        "BOTH": ["get_top_gainers", "get_top_losers"],
                    },
                },
                "market_text": {
                    "type": "string",
                    "label": {"pt": "o mercado", "en": "the market", "es": "el mercado"},
                    "description": "o mercado (the market): como o usuário mencionou, ex. Brasil, Suécia.",
                    "pattern": MARKET_PATTERN,
                },
            },
        },
    ],
    "capabilities": [
        {
            "capability": "get_stock_price",
            "tool": "get_stock_price",
            "metadata": {
                "language_param": "language",
                "intent_hints": {
                    "keywords": [
                        *("preço", "valor", "cotação", "quanto está", "quanto custa", "quanto vale"),
                        *("price", "how much", "quote", "trading at"),
                        *("precio", "cotización", "cuánto vale", "cuánto cuesta", "cuánto está"),
                    ],
                    "examples": [
                        "qual o preço da PETR4?",
                        "what is the price of PETR4?",
                        "¿cuál es el precio de PETR4?",
                    ],
                },
                "decomposition": {
                    "array_params": [
                        {"param_name": "symbols", "single_param_name": "symbol_text", "max_concurrency": 4}
                    ]
                },
                "composition": {
                    "followup_roles": ["notifier"],
                    "enabled_if": {"path": "parameters.notify", "equals": True},
                    "param_map": {"message": {"from_parameters": ["_step_explanation"]}},
                },
                "flow": {
                    "pre": [
                        {
                            "type": "resolve",
                            "param": "symbol",
                            "from_param": "symbol_text",
                            "search_capability": "search_symbol",
                            "query_param": "query",
                            "candidates": "matches",
                            "value": "symbol",
                            "label": ["name", "exchange", "currency"],
                            "question": {
                                "pt": "Encontrei mais de uma listagem para '{query}': {choices} Qual delas?",
                                "en": "I found more than one listing for '{query}': {choices} Which one?",
                                "es": "Encontré más de un listado para '{query}': {choices} ¿Cuál de ellos?",
                            },
                            "not_found": {
                                "pt": "Não encontrei nenhuma listagem para '{query}'.",
                                "en": "I found no listing for '{query}'.",
                                "es": "No encontré ningún listado para '{query}'.",
                            },
                        }
                    ]
                },
            },
        },
        {"capability": "search_symbol", "tool": "search_symbol", "metadata": {"roles": ["symbol_search"]}},
        {
            "capability": "get_top_gainers",
            "tool": "get_top_gainers",
            "metadata": {
                "language_param": "language",
                "intent_hints": {"keywords": ["maiores altas", "subiram", "top gainers", "mayores subidas"]},
            },
        },
        {
            "capability": "get_top_losers",
            "tool": "get_top_losers",
            "metadata": {
                "language_param": "language",
                "intent_hints": {"keywords": ["maiores baixas", "caíram", "top losers", "mayores caídas"]},
            },
        },
        {
            "capability": "send_message",
            "tool": "send_message",
            "metadata": {"roles": ["notifier"], "language_param": "language"},
        },
    ],
}


def manifest() -> str:
    """The domain manifest, as JSON."""
    return json.dumps(MANIFEST, ensure_ascii=False)


NOTIFY = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True)


def build_server(*, delay_ms: int = 0, log_level: LogLevel = "INFO") -> MCPServer:
    server = new_server(
        NAME,
        title="Finance (exemplo)",
        instructions="Cotações, maiores altas/baixas, busca de símbolos e avisos. Dados de demo; manifesto em "
        f"{MANIFEST_URI}.",
        delay_ms=delay_ms,
        log_level=log_level,
    )
    for tool, hints in (
        (search_symbol, READ_ONLY),
        (get_stock_price, READ_ONLY),
        (get_top_gainers, READ_ONLY),
        (get_top_losers, READ_ONLY),
        (send_message, NOTIFY),
        (sent_messages, READ_ONLY),
    ):
        server.add_tool(tool, annotations=hints)
    described = server.resource(
        MANIFEST_URI, name="manifest", description="The finance domain's manifest", mime_type="application/json"
    )
    described(manifest)
    return server


if __name__ == "__main__":
    main(build_server, description=__doc__.splitlines()[0], port_env=PORT_ENV, default_port=DEFAULT_PORT)
