"""The guard asks before a click on a risky button in each of the ten languages, and not before a harmless one.

Real Chromium with the real extension and the real gateway; the agent's clicks come through the official MCP client
and Playwright plays the person, who denies every card. Each page (tests/site/lang/<code>.html, `<html lang>` set)
is built as mail, shop and account pages are: a mail toolbar (trash, archive), a shop (buy, and a transfer, publish
or post), account settings (cancel a subscription, sign out), and harmless buttons that name the same steps as a
record or a list ("Gelöschte Elemente", "送信済み"). The page records every click in `window.events`, read after
the tool's answer, which comes after any effect. One navigation per language; the word lists themselves are tested
whole in test_guard_units.py (`test_risky_words_in_each_language`).
"""

from __future__ import annotations

import pytest
from mcp import Client
from playwright.async_api import BrowserContext, Page, expect
from refs import ref_of

from .conftest import person_browser
from .test_guard_keys import ASKS, answer, declined, events, open_page
from .test_panel import guard_said, result_text

pytestmark = pytest.mark.anyio


context, tunnel = person_browser("languages")

# Each page's risky buttons, with the words of our list the guard quotes for them, and its harmless buttons.
PAGES: dict[str, tuple[list[tuple[str, str]], list[str]]] = {
    "en": ([("Move to trash", "move to trash"), ("Archive", "archive"), ("Buy now", "buy"), ("Withdraw", "withdraw"),
            ("Cancel subscription", "cancel subscription"), ("Sign out", "sign out")],
           ["Payment history", "Add to cart", "Show more"]),
    "es": ([("Mover a la papelera", "mover a la papelera"), ("Archivar", "archivar"),
            ("Comprar ahora", "comprar ahora"), ("Retirar", "retirar"),
            ("Cancelar suscripción", "cancelar suscripción"), ("Cerrar sesión", "cerrar sesión")],
           ["Historial de pagos", "Añadir al carrito", "Ver más"]),
    "de": ([("In den Papierkorb verschieben", "in den papierkorb verschieben"), ("Archivieren", "archivieren"),
            ("Jetzt kaufen", "jetzt kaufen"), ("Überweisen", "überweisen"), ("Abo kündigen", "abo kündigen"),
            ("Abmelden", "abmelden")],
           ["Gelöschte Elemente", "In den Warenkorb", "Mehr anzeigen"]),
    "fr": ([("Mettre à la corbeille", "mettre à la corbeille"), ("Archiver", "archiver"),
            ("Acheter maintenant", "acheter maintenant"), ("Publier", "publier"), ("Se désabonner", "se désabonner"),
            ("Se déconnecter", "se déconnecter")],
           ["Éléments supprimés", "Ajouter au panier", "Afficher plus"]),
    "pt": ([("Mover para a lixeira", "mover para a lixeira"), ("Arquivar", "arquivar"),
            ("Comprar agora", "comprar agora"), ("Publicar", "publicar"),
            ("Cancelar assinatura", "cancelar assinatura"), ("Sair", "sair")],
           ["Itens excluídos", "Adicionar ao carrinho", "Mostrar mais"]),
    "it": ([("Sposta nel cestino", "sposta nel cestino"), ("Archivia", "archivia"), ("Acquista ora", "acquista ora"),
            ("Preleva", "preleva"), ("Annulla iscrizione", "annulla iscrizione"), ("Esci", "esci")],
           ["Elementi eliminati", "Aggiungi al carrello", "Mostra altro"]),
    "ru": ([("Переместить в корзину", "переместить в корзину"), ("В архив", "в архив"), ("Купить", "купить"),
            ("Опубликовать", "опубликовать"), ("Отменить подписку", "отменить подписку"), ("Выйти", "выйти")],
           ["Удалённые", "Добавить в корзину", "Показать ещё"]),
    "ja": ([("ゴミ箱に移動", "ゴミ箱に移動"), ("アーカイブ", "アーカイブ"), ("今すぐ購入", "購入"),
            ("投稿する", "投稿"), ("登録解除", "登録解除"), ("ログアウト", "ログアウト")],
           ["送信済み", "カートに入れる", "もっと見る"]),
    "zh": ([("移至回收站", "移至回收站"), ("归档", "归档"), ("立即购买", "立即购买"), ("轉帳", "轉帳"),
            ("取消订阅", "取消订阅"), ("退出登录", "退出登录")],
           ["已删除", "加入购物车", "查看更多"]),
    "ko": ([("휴지통으로 이동", "휴지통"), ("보관처리", "보관처리"), ("바로 구매", "바로 구매"), ("송금", "송금"),
            ("구독 취소", "구독 취소"), ("로그아웃", "로그아웃")],
           ["삭제된 항목", "장바구니 담기", "더 보기"]),
}


@pytest.mark.parametrize("lang", PAGES)
async def test_risky_words_ask_and_harmless_ones_do_not_on_a_page_in_each_language(
        panel: Page, client: Client, context: BrowserContext, site: str, lang: str) -> None:
    risky, harmless = PAGES[lang]
    snap, tab = await open_page(client, context, f"{site}/lang/{lang}.html")
    assert await tab.evaluate("document.documentElement.lang") == lang
    for label, said in risky:
        title, result = await answer(panel, client, "browser_click", {"ref": ref_of(snap, f'button "{label}"')}, "deny")
        assert title == f'{ASKS}click button "{label}"'
        assert declined(result)
        # Our own words say what made it risky: the word of our list, never more of the page's text.
        assert f'an element whose label says "{said}"' in result_text(result), result_text(result)
    assert await events(tab) == []  # no denied click reached the page
    for label in harmless:
        # Answered with no one at the panel: no card was shown.
        res = await client.call_tool("browser_click", {"ref": ref_of(snap, f'button "{label}"')})
        assert not res.is_error, result_text(res)
        assert guard_said(res) == "allowed"
    await expect(panel.locator(".card")).to_have_count(0)
    assert await events(tab) == harmless
