"""The composer: the message box, its ``@`` picker and the mention chips (plain span maths in ``chips``)."""
