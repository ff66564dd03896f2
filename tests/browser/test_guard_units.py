"""The guard's pure decisions (lib/guard.js, lib/risky-words.js, lib/catalogue.js's check), run as the shipped
modules inside the extension's own page: which clicks, keys, choices, drops and dialogs ask, in which words, and by
which rule. The rest of the extension's pure decisions are in test_units.py, whose `run` and `element` these share.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from playwright.async_api import Page

from .harness import unpaired_panel
from .test_units import element, run

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
async def page(site: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Page]:
    async with unpaired_panel(site, tmp_path_factory.mktemp("units-guard")) as page:
        yield page


@pytest.mark.parametrize(("label", "risk"), [
    ("Buy now", "buy"), ("Place order", "order"), ("Pay", "pay"), ("Checkout", "checkout"), ("Send", "send"),
    ("Post reply", "post"), ("Delete account", "delete"), ("Sign in", "sign in"), ("Log in", "sign in"),
    ("Upload photo", "upload"), ("Transfer money", "transfer"), ("Subscribe", "subscribe"),
    ("Preview", None), ("Next page", None), ("Sending tips", None), ("Deleted items", None),
    ("Payment history", None), ("Show more", None),
])
async def test_click_labels(page: Page, label: str, risk: str | None) -> None:
    got = await run(page, "guard.js", "m.classify('browser_click', arg)", element("button", label))
    assert (got and got["risk"]) == risk


# Each language's button words as pages write them: (label, risk, said); and its harmless labels.
RISKY_WORDS: dict[str, list[tuple[str, str, str]]] = {
    "en": [
        ("Move to trash", "trash", "move to trash"), ("Discard draft", "trash", "discard"), ("Bin", "trash", "bin"),
        ("Archive", "archive", "archive"), ("Unsubscribe", "unsubscribe", "unsubscribe"),
        ("Cancel my subscription", "unsubscribe", "cancel my subscription"),
        ("Withdraw funds", "transfer", "withdraw"), ("Publish", "publish", "publish"), ("Post", "post", "post"),
        ("Sign out", "sign out", "sign out"), ("Sign-in", "sign in", "sign-in"), ("Log in", "sign in", "log in"),
    ],
    "es": [
        ("Comprar", "buy", "comprar"), ("Comprar ahora", "buy", "comprar ahora"), ("Eliminar", "delete", "eliminar"),
        ("Enviar", "send", "enviar"), ("Pagar", "pay", "pagar"), ("Borrar", "delete", "borrar"),
        ("Mover a la papelera", "trash", "mover a la papelera"),
        ("Cancelar suscripción", "unsubscribe", "cancelar suscripción"),
        ("Darse de baja", "unsubscribe", "darse de baja"), ("Cerrar sesión", "sign out", "cerrar sesión"),
        ("Iniciar sesión", "sign in", "iniciar sesión"), ("Publicar", "publish", "publicar"),
        ("Transferir", "transfer", "transferir"), ("Retirar", "transfer", "retirar"),
        ("Archivar", "archive", "archivar"), ("Registrarse", "sign up", "registrarse"),
        ("Realizar pedido", "order", "realizar pedido"), ("Finalizar compra", "checkout", "finalizar compra"),
    ],
    "de": [
        ("Kaufen", "buy", "kaufen"), ("Jetzt kaufen", "buy", "jetzt kaufen"),
        ("Zahlungspflichtig bestellen", "order", "zahlungspflichtig bestellen"), ("Löschen", "delete", "löschen"),
        ("Senden", "send", "senden"), ("Abschicken", "send", "abschicken"),
        ("In den Papierkorb verschieben", "trash", "in den papierkorb verschieben"),
        ("Abmelden", "sign out", "abmelden"), ("Anmelden", "sign in", "anmelden"),
        ("Kündigen", "unsubscribe", "kündigen"), ("Abo kündigen", "unsubscribe", "abo kündigen"),
        ("Überweisen", "transfer", "überweisen"), ("Veröffentlichen", "publish", "veröffentlichen"),
        ("Archivieren", "archive", "archivieren"), ("Zur Kasse", "checkout", "zur kasse"),
        ("Hochladen", "upload", "hochladen"), ("Registrieren", "sign up", "registrieren"),
        ("Geld abheben", "transfer", "geld abheben"),
    ],
    "fr": [
        ("Acheter", "buy", "acheter"), ("Commander", "order", "commander"), ("Payer", "pay", "payer"),
        ("Envoyer", "send", "envoyer"), ("Supprimer", "delete", "supprimer"),
        ("Mettre à la corbeille", "trash", "mettre à la corbeille"),
        ("Se désabonner", "unsubscribe", "se désabonner"), ("Se déconnecter", "sign out", "se déconnecter"),
        ("Se connecter", "sign in", "se connecter"), ("Publier", "publish", "publier"),
        ("Virement", "transfer", "virement"), ("Archiver", "archive", "archiver"),
        ("S’abonner", "subscribe", "s’abonner"), ("Résilier l'abonnement", "unsubscribe", "résilier l'abonnement"),
        ("Créer un compte", "sign up", "créer un compte"), ("Retirer des fonds", "transfer", "retirer des fonds"),
        ("Passer la commande", "order", "passer la commande"),
    ],
    "pt": [
        ("Comprar agora", "buy", "comprar agora"), ("Finalizar compra", "checkout", "finalizar compra"),
        ("Pagar", "pay", "pagar"), ("Enviar", "send", "enviar"), ("Excluir", "delete", "excluir"),
        ("Apagar", "delete", "apagar"), ("Mover para a lixeira", "trash", "mover para a lixeira"),
        ("Cancelar assinatura", "unsubscribe", "cancelar assinatura"),
        ("Cancelar inscrição", "unsubscribe", "cancelar inscrição"), ("Sair", "sign out", "sair"),
        ("Entrar", "sign in", "entrar"), ("Cadastre-se", "sign up", "cadastre-se"),
        ("Publicar", "publish", "publicar"), ("Transferir", "transfer", "transferir"), ("Sacar", "transfer", "sacar"),
        ("Arquivar", "archive", "arquivar"), ("Inscrever-se", "subscribe", "inscrever-se"),
    ],
    "it": [
        ("Acquista ora", "buy", "acquista ora"), ("Ordina ora", "order", "ordina ora"),
        ("Procedi al pagamento", "checkout", "procedi al pagamento"), ("Paga", "pay", "paga"),
        ("Invia", "send", "invia"), ("Elimina", "delete", "elimina"), ("Cancella", "delete", "cancella"),
        ("Sposta nel cestino", "trash", "sposta nel cestino"), ("Archivia", "archive", "archivia"),
        ("Annulla iscrizione", "unsubscribe", "annulla iscrizione"), ("Esci", "sign out", "esci"),
        ("Accedi", "sign in", "accedi"), ("Registrati", "sign up", "registrati"), ("Pubblica", "publish", "pubblica"),
        ("Esegui bonifico", "transfer", "esegui bonifico"), ("Preleva", "transfer", "preleva"),
        ("Iscriviti", "subscribe", "iscriviti"), ("Carica", "upload", "carica"),
    ],
    "ru": [
        ("Купить", "buy", "купить"), ("Оформить заказ", "checkout", "оформить заказ"),
        ("Заказать", "order", "заказать"), ("Оплатить", "pay", "оплатить"), ("Отправить", "send", "отправить"),
        ("Удалить", "delete", "удалить"), ("Переместить в корзину", "trash", "переместить в корзину"),
        ("В архив", "archive", "в архив"), ("Отписаться", "unsubscribe", "отписаться"),
        ("Отменить подписку", "unsubscribe", "отменить подписку"), ("Войти", "sign in", "войти"),
        ("Выйти", "sign out", "выйти"), ("Зарегистрироваться", "sign up", "зарегистрироваться"),
        ("Опубликовать", "publish", "опубликовать"), ("Перевести деньги", "transfer", "перевести деньги"),
        ("Вывести средства", "transfer", "вывести средства"), ("Подписаться", "subscribe", "подписаться"),
        ("Загрузить", "upload", "загрузить"),
    ],
    "ja": [
        ("購入", "buy", "購入"), ("今すぐ購入", "buy", "購入"), ("注文を確定する", "order", "注文を確定"),
        ("支払う", "pay", "支払う"), ("削除", "delete", "削除"), ("削除しますか？", "delete", "削除"),
        ("送信", "send", "送信"), ("ゴミ箱に移動", "trash", "ゴミ箱に移動"), ("登録解除", "unsubscribe", "登録解除"),
        ("ログアウト", "sign out", "ログアウト"), ("ログイン", "sign in", "ログイン"), ("投稿する", "post", "投稿"),
        ("公開", "publish", "公開"), ("振込", "transfer", "振込"), ("購入手続きへ", "checkout", "購入手続き"),
        ("アーカイブ", "archive", "アーカイブ"), ("出金", "transfer", "出金"),
        ("チャンネル登録", "subscribe", "チャンネル登録"), ("アップロード", "upload", "アップロード"),
    ],
    "zh": [
        ("购买", "buy", "购买"), ("購買", "buy", "購買"), ("立即购买", "buy", "立即购买"),
        ("提交订单", "order", "提交订单"), ("支付", "pay", "支付"), ("付款", "pay", "付款"),
        ("删除", "delete", "删除"), ("刪除", "delete", "刪除"), ("发送", "send", "发送"), ("發送", "send", "發送"),
        ("移至回收站", "trash", "移至回收站"), ("垃圾桶", "trash", "垃圾桶"), ("取消订阅", "unsubscribe", "取消订阅"),
        ("退出登录", "sign out", "退出登录"), ("登出", "sign out", "登出"), ("登录", "sign in", "登录"),
        ("登入", "sign in", "登入"), ("发布", "publish", "发布"), ("發布", "publish", "發布"),
        ("转账", "transfer", "转账"), ("轉帳", "transfer", "轉帳"), ("提现", "transfer", "提现"),
        ("归档", "archive", "归档"), ("注册", "sign up", "注册"), ("上传", "upload", "上传"),
    ],
    "ko": [
        ("구매하기", "buy", "구매"), ("결제하기", "pay", "결제하기"), ("주문하기", "order", "주문하기"),
        ("삭제", "delete", "삭제"), ("보내기", "send", "보내기"), ("전송", "send", "전송"),
        ("휴지통으로 이동", "trash", "휴지통"), ("구독 취소", "unsubscribe", "구독 취소"),
        ("로그아웃", "sign out", "로그아웃"), ("로그인", "sign in", "로그인"), ("게시", "post", "게시"),
        ("발행", "publish", "발행"), ("송금", "transfer", "송금"), ("출금", "transfer", "출금"),
        ("회원가입", "sign up", "회원가입"), ("보관처리", "archive", "보관처리"), ("업로드", "upload", "업로드"),
    ],
}
HARMLESS_WORDS: dict[str, list[str]] = {
    "en": [
        "Preview", "Next page", "Sending tips", "Deleted items", "Payment history", "Show more", "Add to cart",
    ],
    "es": [
        "Historial de pagos", "Elementos eliminados", "Enviados", "Mis pedidos", "Ver más", "Cancelar",
        "Envío gratis", "Configuración", "Añadir al carrito",
    ],
    "de": [
        "Gelöschte Elemente", "Zahlungsverlauf", "Bestellungen", "Gesendet", "Mehr anzeigen", "Einstellungen",
        "Abbrechen", "In den Warenkorb",
    ],
    "fr": [
        "Éléments supprimés", "Historique des paiements", "Envoyés", "Mes commandes", "Afficher plus", "Annuler",
        "Paramètres", "Statut : payé", "Ajouter au panier",
    ],
    "pt": [
        "Itens excluídos", "Histórico de pagamentos", "Enviados", "Meus pedidos", "Mostrar mais", "Cancelar",
        "Configurações", "Adicionar ao carrinho",
    ],
    "it": [
        "Elementi eliminati", "Cronologia pagamenti", "Posta inviata", "I miei ordini", "Mostra altro", "Annulla",
        "Ordina per prezzo", "Carica altri risultati", "Aggiungi al carrello",
    ],
    "ru": [
        "Удалённые", "Удаленные", "История платежей", "Отправленные", "Корзина", "Добавить в корзину", "Показать ещё",
        "Отмена", "Настройки", "Входящие", "Перевести страницу",
    ],
    "ja": [
        "送信済み", "削除済みアイテム", "購入履歴", "支払い方法", "注文履歴", "もっと見る", "非公開", "キャンセル",
        "設定", "カートに入れる", "投稿者", "ログイン中",
    ],
    "zh": [
        "已删除", "已发送", "购买记录", "支付方式", "待付款", "我的订单", "查看更多", "取消", "设置", "加入购物车",
        "支付宝", "已發布",
    ],
    "ko": [
        "삭제된 항목", "결제 내역", "보낸편지함", "구매내역", "더 보기", "주문 내역", "취소", "설정", "내보내기",
        "장바구니 담기", "게시판", "로그인 상태 유지",
    ],
}


@pytest.mark.parametrize(("lang", "label", "risk", "said"),
                         [(lang, *case) for lang, cases in RISKY_WORDS.items() for case in cases])
async def test_risky_words_in_each_language(page: Page, lang: str, label: str, risk: str, said: str) -> None:
    # `said` is quoted in openab's voice: it is our list's word, lower-cased, never more of the page's text.
    assert await run(page, "risky-words.js", "m.riskyWord(arg)", label) == {"risk": risk, "said": said}


@pytest.mark.parametrize(("lang", "label"),
                         [(lang, label) for lang, labels in HARMLESS_WORDS.items() for label in labels])
async def test_harmless_words_in_each_language(page: Page, lang: str, label: str) -> None:
    # History, settings and list pages name a step as a noun or a state: "deleted", "sent", "payment method".
    assert await run(page, "risky-words.js", "m.riskyWord(arg)", label) is None


async def test_risky_words_cover_the_ten_languages_and_only_our_risks(page: Page) -> None:
    got = await run(page, "risky-words.js", "({langs: Object.keys(m.LANGUAGES), risks: m.RISKS,"
                    " found: arg.map((l) => m.riskyWord(l)?.risk)})",
                    [label for cases in RISKY_WORDS.values() for label, _, _ in cases])
    assert sorted(got["langs"]) == sorted(RISKY_WORDS) == sorted(HARMLESS_WORDS)
    assert set(got["found"]) <= set(got["risks"])
    assert {"trash", "archive", "unsubscribe", "transfer", "publish", "post", "sign out"} <= set(got["risks"])


@pytest.mark.parametrize(("text", "risk", "said"), [
    # The first risky word in the text wins; where two start at one place, the longer.
    ("Löschen oder senden", "delete", "löschen"), ("Enviar y eliminar", "send", "enviar"),
    ("登録解除", "unsubscribe", "登録解除"), ("Retirer des fonds", "transfer", "retirer des fonds"),
    # Edges are Unicode-aware: a word glued to letters of any script is another word.
    ("Payé", None, None), ("Delete\u00e9", None, None), ("x-delete", "delete", "delete"),
    ("\U0001f5d1\ufe0fDelete", "delete", "delete"), ("\U0001d403elete", None, None),
    ("ПЕРЕМЕСТИТЬ В КОРЗИНУ", "trash", "переместить в корзину"), ("Se  déconnecter", "sign out", "se déconnecter"),
    ("", None, None), (None, None, None),
])
async def test_risky_words_order_and_edges(page: Page, text: str | None, risk: str | None, said: str | None) -> None:
    got = await run(page, "risky-words.js", "m.riskyWord(arg)", text)
    assert got == (risk and {"risk": risk, "said": said})


async def test_submit_controls_are_risky_whatever_they_say(page: Page) -> None:
    desc = element("button", "Continue", submit=True, formAction="https://pay.example/charge")
    got = await run(page, "guard.js", "m.classify('browser_click', arg)", desc)
    # `what` is our words only; the page's (the label, the form's host) are kept apart in `target`.
    assert got == {"risk": "submit", "rule": "submit", "action": 'submit a form to pay.example with button "Continue"',
                   "what": "submit a form", "target": 'button "Continue", form to pay.example'}


@pytest.mark.parametrize(("tool", "desc", "args", "secret"), [
    # Typing into or choosing in credential and payment fields.
    ("browser_type", {"sensitive": "password", "tag": "input", "role": "textbox"}, {}, "password"),
    ("browser_type", {"sensitive": "otp", "tag": "input", "role": "textbox"}, {}, "one-time code"),
    ("browser_type", {"sensitive": "secret", "tag": "div", "role": "textbox"}, {}, "secret"),
    ("browser_select_option", {"sensitive": "payment", "tag": "select", "role": "combobox"}, {}, "payment"),
    # Submitting a form that has such a field, however it is done.
    ("browser_click", {"submit": True, "guarded": "password"}, {}, "password"),
    ("browser_click", {"name": "Pay now", "guarded": "payment"}, {}, "payment"),
    ("browser_press_key", {"tag": "input", "role": "textbox", "guarded": "otp"}, {"key": "Enter"}, "one-time code"),
    # Routine risky steps stay coverable by a site rule or autopilot.
    ("browser_click", {"submit": True, "guarded": None}, {}, None),
    ("browser_click", {"name": "Delete draft", "guarded": None}, {}, None),
    ("browser_type", {"sensitive": None, "tag": "input", "role": "textbox", "guarded": "password"}, {}, "routine"),
    ("browser_click", {"name": "Preview", "guarded": "password"}, {}, "routine"),
])
async def test_credential_and_payment_steps_are_marked_to_always_ask(
    page: Page, tool: str, desc: dict[str, Any], args: dict[str, Any], secret: str | None
) -> None:
    got = await run(page, "guard.js", "m.classify(arg.tool, arg.desc, arg.args)",
                    {"tool": tool, "desc": element("button", "Go") | desc, "args": args})
    if secret == "routine":
        assert got is None
    else:
        assert got is not None and got.get("secret") == secret


@pytest.mark.parametrize(("tool", "desc", "args", "risk"), [
    ("browser_type", {"sensitive": "password", "tag": "input", "role": "textbox"}, {}, "sensitive_field"),
    ("browser_type", {"sensitive": "payment", "tag": "input", "role": "textbox"}, {}, "sensitive_field"),
    ("browser_type", {"sensitive": None, "tag": "input", "role": "textbox"}, {}, None),
    ("browser_select_option", {"sensitive": "payment", "tag": "select", "role": "combobox"}, {}, "sensitive_field"),
    ("browser_click", {"sensitive": "file", "tag": "input", "role": "button"}, {}, "upload"),
    ("browser_press_key", {"sensitive": None, "tag": "input", "role": "textbox", "inForm": True}, {"key": "Enter"},
     "submit"),
    ("browser_press_key", {"sensitive": None, "tag": "textarea", "role": "textbox", "inForm": True}, {"key": "Enter"},
     "submit"),
    ("browser_press_key", {"sensitive": None, "tag": "input", "role": "textbox"}, {"key": "Escape"}, None),
    ("browser_press_key", {"sensitive": None, "tag": "a", "role": "link"}, {"key": "Enter"}, None),
    # Enter in any editable outside a form is a send; in any input of a form, a submit.
    ("browser_press_key", {"tag": "div", "role": "combobox", "editable": True}, {"key": "Enter"}, "send"),
    ("browser_press_key", {"tag": "input", "role": "textbox"}, {"key": "NumpadEnter"}, "send"),
    ("browser_press_key", {"tag": "input", "type": "checkbox", "role": "checkbox", "inForm": True}, {"key": "Enter"},
     "submit"),
    ("browser_press_key", {"tag": "div", "role": "textbox", "editable": True}, {"key": " "}, None),
    ("browser_press_key", {"tag": "div", "role": "textbox", "editable": True}, {"key": "a"}, None),
    # A key that activates a control is decided as a click on it.
    ("browser_press_key", {"tag": "div", "role": "button", "name": "Delete account"}, {"key": "Enter"}, "delete"),
    ("browser_press_key", {"tag": "div", "role": "button", "name": "Delete account"}, {"key": "Space"}, "delete"),
    ("browser_press_key", {"tag": "span", "role": "generic", "name": "Send"}, {"key": "Control+Enter"}, "send"),
    ("browser_press_key", {"tag": "button", "role": "button", "name": "Go", "submit": True}, {"key": "Enter"},
     "submit"),
    ("browser_press_key", {"tag": "input", "type": "checkbox", "role": "checkbox", "name": "Subscribe"}, {"key": " "},
     "subscribe"),
    ("browser_press_key", {"tag": "div", "role": "button", "name": "Delete account"}, {"key": "ArrowDown"}, None),
    ("browser_press_key", {"tag": "div", "role": "button", "name": "Delete account"}, {"key": "Tab"}, None),
])
async def test_fields_and_keys(page: Page, tool: str, desc: dict[str, Any], args: dict[str, Any],
                               risk: str | None) -> None:
    got = await run(page, "guard.js", "m.classify(arg.tool, arg.desc, arg.args)",
                    {"tool": tool, "desc": element("textbox", "Field") | desc, "args": args})
    assert (got and got["risk"]) == risk


@pytest.mark.parametrize(("name", "expected"), [
    ("Enter", {"key": "Enter", "code": "Enter", "activates": "Enter", "label": "Enter"}),
    ("NumpadEnter", {"key": "Enter", "code": "NumpadEnter", "activates": "Enter", "label": "Enter"}),
    (" ", {"key": " ", "code": "Space", "activates": "Space", "label": "Space"}),
    ("ctrl+shift+space", {"key": " ", "ctrlKey": True, "shiftKey": True, "label": "Control+Shift+Space"}),
    ("Meta+Return", {"key": "Enter", "metaKey": True, "label": "Meta+Enter"}),
    ("a", {"key": "a", "code": "KeyA", "activates": "", "label": "a"}),
    ("Shift+Tab", {"key": "Tab", "code": "Tab", "shiftKey": True, "activates": ""}),
    ("+", {"key": "+", "shiftKey": False}), ("Shift++", {"key": "+", "shiftKey": True}),
    ("Shift", {"key": "Shift", "label": "Shift"}), ("é", {"key": "é", "label": "é"}),
    ("Hyper+Enter", "bad_args"), ("Control+", "bad_args"), ("", "bad_args"), ("x" * 65, "bad_args"),
    # Any other word is no key: it would stand in the person's card in openab's words.
    ("Delete everything", "bad_args"), ("Control+Buy now", "bad_args"),
])
async def test_key_names(page: Page, name: str, expected: dict[str, Any] | str) -> None:
    body = "(() => { try { return m.keyPress(arg); } catch (e) { return e.code; } })()"
    got = await run(page, "guard.js", body, name)
    if isinstance(expected, str):
        assert got == expected
    else:
        assert {k: got[k] for k in expected} == expected


@pytest.mark.parametrize(("desc", "accept", "risk", "secret"), [
    ({"type": "confirm", "message": "Delete account? This cannot be undone."}, True, "delete", None),
    ({"type": "confirm", "message": "Send the message to 40 people?"}, True, "send", None),
    ({"type": "prompt", "message": "Enter your password to continue"}, True, "sensitive_field", "secret"),
    ({"type": "prompt", "message": "Your 2FA code"}, True, "sensitive_field", "secret"),
    # Cancel, an alert's OK and leaving a page never do the page's risky thing.
    ({"type": "confirm", "message": "Delete account?"}, False, None, None),
    ({"type": "alert", "message": "Your order was placed"}, True, None, None),
    ({"type": "beforeunload", "message": ""}, True, None, None),
    ({"type": "confirm", "message": "Save the draft before going on?"}, True, None, None),
    ({"type": "prompt", "message": "Deleted items: name the folder"}, True, None, None),
])
async def test_accepting_a_dialog_is_classified_by_its_words(
    page: Page, desc: dict[str, Any], accept: bool, risk: str | None, secret: str | None
) -> None:
    got = await run(page, "guard.js", "m.classify('browser_handle_dialog', arg.desc, {accept: arg.accept})",
                    {"desc": desc | {"origin": "https://shop.example"}, "accept": accept})
    assert (got and got["risk"]) == risk
    assert ((got and got.get("secret")) or None) == secret
    if got:
        # Our words in `what`; the page's (its dialog text) only in `target` and the card's `action`.
        assert desc["message"][:20] not in got["what"] and desc["message"][:20] in got["target"]


ROW = element("option", "Invoice from ACME", tag="li")
SEARCH = element("searchbox", "Search mail", tag="input", type="search")
PASSWORD = element("textbox", "Password", tag="input", type="password", sensitive="password")
LIST = element("combobox", "Density", tag="select")
PAGE = element("page", "", tag="body", page=True, selected='option "Invoice from ACME"')


@pytest.mark.parametrize(("desc", "key", "rule"), [
    # Outside a text field any key but moving and scrolling can be the page's own shortcut.
    (ROW, "Delete", "key-shortcut"), (ROW, "#", "key-shortcut"), (ROW, "e", "key-shortcut"),
    (ROW, "Control+Enter", "key-shortcut"), (PAGE, "#", "key-shortcut"), (PAGE, "Backspace", "key-shortcut"),
    (PAGE, "Alt+ArrowLeft", "key-shortcut"), (PAGE, "F2", "key-shortcut"), (LIST, "Delete", "key-shortcut"),
    (SEARCH, "Control+s", "key-shortcut"), (SEARCH, "Alt+e", "key-shortcut"),
    (ROW, "ArrowDown", None), (ROW, "Tab", None), (PAGE, "Escape", None), (PAGE, "PageDown", None),
    (PAGE, "Shift+Tab", None), (PAGE, "Control+End", None), (ROW, "Shift", None),
    # In a text field: typing and editing.
    (SEARCH, "#", None), (SEARCH, "Delete", None), (SEARCH, "Control+a", None), (SEARCH, "Meta+v", None),
    (SEARCH, "Control+Backspace", None), (SEARCH, " ", None), (LIST, "c", None),
    # A character typed into a password field is filling it.
    (PASSWORD, "x", "secret-field"),
    # Enter and Space keep their rules: a click on what they activate, a send in a field.
    (element("button", "Delete account"), "Enter", "key-activates:risky-word:delete"),
    (element("button", "Preview"), " ", None), (SEARCH, "Enter", "key-sends"),
])
async def test_keys_are_judged_on_what_they_can_do_where_they_land(
        page: Page, desc: dict[str, Any], key: str, rule: str | None) -> None:
    got = await run(page, "guard.js", "m.classify('browser_press_key', arg.desc, { key: arg.key })",
                    {"desc": desc, "key": key})
    assert (got and got["rule"]) == rule


@pytest.mark.parametrize(("name", "choice", "rule"), [
    ("Bulk actions", {"chosen": ["Delete selected accounts"]}, "choice-risky-word:delete"),
    ("Pay now", {"chosen": ["$5,000"]}, "choice-risky-word:pay"),
    ("Account", {"chosen": ["Supprimer mon compte"]}, "choice-risky-word:delete"),
    ("Sort by", {"chosen": ["Oldest"], "submits": True}, "choice-submits"),
    ("Go to", {"chosen": ["Keys"], "navigates": True}, "choice-navigates"),
    ("Colour", {"chosen": ["Blue"]}, None),
    ("Bulk actions", {"chosen": ["Mark as read"]}, None),
])
async def test_a_choice_is_judged_by_the_list_the_option_and_what_its_change_does(
        page: Page, name: str, choice: dict[str, Any], rule: str | None) -> None:
    desc = element("combobox", name, tag="select", choice=choice)
    got = await run(page, "guard.js", "m.classify('browser_select_option', arg)", desc)
    assert (got and got["rule"]) == rule


@pytest.mark.parametrize(("onto", "rule"), [
    (element("button", "Move to trash"), "drop-target:risky-word:trash"),
    (element("button", "In den Papierkorb verschieben"), "drop-target:risky-word:trash"),
    (element("button", "Delete"), "drop-target:risky-word:delete"),
    (element("button", "Go", submit=True, formAction="https://shop.example/order"), "drop-target:submit"),
    (element("listitem", "Done"), None),
])
async def test_a_drop_is_judged_as_a_click_on_its_target(page: Page, onto: dict[str, Any], rule: str | None) -> None:
    desc = element("listitem", "Mail", tag="li", drop=onto)
    got = await run(page, "guard.js", "m.classify('browser_drag', arg)", desc)
    assert (got and got["rule"]) == rule


async def test_every_acting_tool_has_a_guard_rule_and_a_catalogue_without_one_is_refused(page: Page) -> None:
    # The shipped catalogue passes; one whose acting tool lost its rule, or names an unknown facet, stops the worker.
    body = """(() => {
      const tools = m.TOOLS.map((t) => ({ ...t, facts: { ...m.factsOf(t.name) } }));
      const refused = (edit) => {
        const copy = structuredClone(tools);
        edit(copy.find((t) => t.name === 'browser_click'));
        try { m.checkFacts(copy); return ''; } catch (e) { return e.message; }
      };
      m.checkFacts(tools);
      return [refused((t) => { t.facts.guard = []; }), refused((t) => { delete t.facts.guard; }),
              refused((t) => { t.facts.guard = ['clicks']; })];
    })()"""
    got = await run(page, "catalogue.js", body)
    assert "browser_click acts on the page and has no guard rule" in got[0]
    assert "browser_click has no facts.guard" in got[1]
    assert "unknown guard facet clicks" in got[2]
