"""The provider presets: default base URL, wire protocol and the models we know (IR 🔗 Adapter 实现清单).

Known models carry what their vendors document; a model that a server lists but we do not know gets the
conservative capability set (phase-2 §8.1).
"""

from __future__ import annotations

from dataclasses import dataclass

from .capabilities import CHAT, STREAMING, STRUCTURED_OUTPUT, THINKING, TOOL_CALLING, VISION, ModelSpec

OPENAI = "openai"
ANTHROPIC = "anthropic"
OLLAMA = "ollama"
MOCK = "mock"
LOCAL = "local"
PROTOCOLS = (OPENAI, ANTHROPIC, OLLAMA, MOCK, LOCAL)


@dataclass(frozen=True)
class Preset:
    preset: str
    display_name: str
    protocol: str
    base_url: str
    protocols: tuple[str, ...]
    """The protocols this vendor speaks (Agnes: OpenAI-compatible and Anthropic-compatible)."""
    base_urls: dict[str, str]
    default_model: str | None
    models: tuple[ModelSpec, ...]
    requires_api_key: bool = True

    def to_dict(self) -> dict[str, object]:
        return {
            "preset": self.preset,
            "display_name": self.display_name,
            "protocol": self.protocol,
            "protocols": list(self.protocols),
            "base_url": self.base_url,
            "base_urls": dict(self.base_urls),
            "default_model": self.default_model,
            "requires_api_key": self.requires_api_key,
            "models": [m.to_phase2() for m in self.models],
        }


_TEXT_TOOLS = (CHAT, STREAMING, TOOL_CALLING, STRUCTURED_OUTPUT)

PRESETS: dict[str, Preset] = {
    p.preset: p
    for p in (
        Preset(
            preset="deepseek",
            display_name="DeepSeek",
            protocol=OPENAI,
            base_url="https://api.deepseek.com",
            protocols=(OPENAI,),
            base_urls={OPENAI: "https://api.deepseek.com"},
            default_model="deepseek-chat",
            models=(
                ModelSpec("deepseek-chat", "DeepSeek Chat", 128_000, 8_192, _TEXT_TOOLS),
                ModelSpec("deepseek-reasoner", "DeepSeek Reasoner", 128_000, 65_536, (*_TEXT_TOOLS, THINKING)),
            ),
        ),
        Preset(
            preset="agnes-ai",
            display_name="Agnes AI",
            protocol=OPENAI,
            base_url="https://apihub.agnes-ai.com/v1",
            protocols=(OPENAI, ANTHROPIC),
            base_urls={OPENAI: "https://apihub.agnes-ai.com/v1", ANTHROPIC: "https://apihub.agnes-ai.com"},
            default_model="agnes-2.0-flash",
            models=(
                ModelSpec("agnes-2.0-flash", "Agnes 2.0 Flash", 256_000, 65_536, (*_TEXT_TOOLS, THINKING, VISION)),
            ),
        ),
        Preset(
            preset="ollama",
            display_name="Ollama (local)",
            protocol=OLLAMA,
            base_url="http://127.0.0.1:11434",
            protocols=(OLLAMA,),
            base_urls={OLLAMA: "http://127.0.0.1:11434"},
            default_model=None,
            models=(),
            requires_api_key=False,
        ),
        Preset(
            preset="anthropic",
            display_name="Anthropic",
            protocol=ANTHROPIC,
            base_url="https://api.anthropic.com",
            protocols=(ANTHROPIC,),
            base_urls={ANTHROPIC: "https://api.anthropic.com"},
            default_model="claude-sonnet-4-5",
            models=(
                ModelSpec("claude-sonnet-4-5", "Claude Sonnet 4.5", 200_000, 64_000, (*_TEXT_TOOLS, THINKING, VISION)),
                ModelSpec("claude-opus-4-1", "Claude Opus 4.1", 200_000, 32_000, (*_TEXT_TOOLS, THINKING, VISION)),
                ModelSpec("claude-haiku-4-5", "Claude Haiku 4.5", 200_000, 64_000, (*_TEXT_TOOLS, THINKING, VISION)),
            ),
        ),
        Preset(
            preset="openai",
            display_name="OpenAI",
            protocol=OPENAI,
            base_url="https://api.openai.com/v1",
            protocols=(OPENAI,),
            base_urls={OPENAI: "https://api.openai.com/v1"},
            default_model="gpt-4o-mini",
            models=(
                ModelSpec("gpt-4o", "GPT-4o", 128_000, 16_384, (*_TEXT_TOOLS, VISION)),
                ModelSpec("gpt-4o-mini", "GPT-4o mini", 128_000, 16_384, (*_TEXT_TOOLS, VISION)),
                ModelSpec("gpt-4.1", "GPT-4.1", 1_047_576, 32_768, (*_TEXT_TOOLS, VISION)),
            ),
        ),
        Preset(
            preset="mock",
            display_name="Mock (scripted, offline)",
            protocol=MOCK,
            base_url="mock://local",
            protocols=(MOCK,),
            base_urls={MOCK: "mock://local"},
            default_model="mock-1",
            models=(ModelSpec("mock-1", "Mock 1", 32_000, 4_096, (*_TEXT_TOOLS, THINKING)),),
            requires_api_key=False,
        ),
        Preset(  # the embedded model, offline, in a worker (issue 15; sidecar/providers/local.py)
            preset="local",
            display_name="Local model (embedded, offline)",
            protocol=LOCAL,
            base_url="local://embedded",
            protocols=(LOCAL,),
            base_urls={LOCAL: "local://embedded"},
            default_model="qwen2.5-coder-0.5b-instruct",
            models=(
                ModelSpec("qwen2.5-coder-0.5b-instruct", "Qwen2.5-Coder 0.5B Instruct", 32_768, 2_048, _TEXT_TOOLS),
            ),
            requires_api_key=False,
        ),
    )
}
